package qlock

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/distlock/distlock"
)

// Options are the settings of a session that every store has, set by
// package recipe's options; the drivers' Configs embed them beside their
// store's own, which the store packages' options set through Own.
type Options struct {
	Prefix    string        // where the locks live: an etcd key prefix, a znode path
	Holder    string        // the value of the session's lock entries
	Logger    *slog.Logger  // nil: silent (see Defaults)
	Observe   Observe       // where metrics and spans go
	Revocable bool          // holders follow revocation requests
	LockDelay time.Duration // held back after a holder went without a release
	// Own are the settings of one store's own options, in the order
	// given; the store applies those of its package and refuses others.
	Own []Own
}

// Own is one store option's setting: Set applies it to the store's
// config.
type Own struct {
	Pkg  string // "etcdlock" or "zklock"
	Name string // the option, as "WithTTL"
	Set  func(config any)
}

// Defaults returns o with a Logger that drops everything if it has none.
func (o Options) Defaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Apply applies the settings of pkg's own options to config, after
// checking the shared ones: an option of the other store, or a negative
// lock-delay, is an error wrapping distlock.ErrInvalidOption.
func (o Options) Apply(pkg string, config any) error {
	if o.LockDelay < 0 {
		return fmt.Errorf("%s: new session: %w: lock-delay %v is negative", pkg, distlock.ErrInvalidOption, o.LockDelay)
	}
	for _, s := range o.Own {
		if s.Pkg != pkg {
			return fmt.Errorf("%s: new session: %w: %s.%s is an option of %s sessions", pkg, distlock.ErrInvalidOption, s.Pkg, s.Name, s.Pkg)
		}
		s.Set(config)
	}
	return nil
}
