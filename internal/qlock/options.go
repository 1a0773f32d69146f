package qlock

import "log/slog"

// Options are the settings of a session that every store has. The
// drivers' Configs embed them beside their store's own; etcdlock's and
// zklock's With* options set them, each documented in its store's words.
type Options struct {
	// Prefix is where the session's locks live: an etcd key prefix, or
	// the znode above their directories.
	Prefix string
	// Holder is the value of the session's lock entries (Inspect's
	// QueueEntry.Holder).
	Holder string
	// Logger gets the session's logs; nil drops them.
	Logger *slog.Logger
	// Observe says where the session reports metrics and spans.
	Observe Observe
	// Revocable makes the session's holders follow revocation requests.
	Revocable bool
}

// Defaults returns o with a Logger: one that drops everything if o has
// none.
func (o Options) Defaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}
