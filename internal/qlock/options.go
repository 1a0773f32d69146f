package qlock

import "log/slog"

// Options are the settings of a session that every store has. The
// drivers' Configs embed them beside their store's own; etcdlock's and
// zklock's With* options set them, each documented in its store's words.
type Options struct {
	Prefix    string       // where the locks live: an etcd key prefix, a znode path
	Holder    string       // the value of the session's lock entries
	Logger    *slog.Logger // nil: silent (see Defaults)
	Observe   Observe      // where metrics and spans go
	Revocable bool         // holders follow revocation requests
}

// Defaults returns o with a Logger that drops everything if it has none.
func (o Options) Defaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}
