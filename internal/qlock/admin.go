package qlock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock"
)

// AdminStore is what a store does for an Admin, on a client and prefix
// (an admin holds nothing): read and follow a lock's whole queue, keep its
// revocation records and its done-markers.
type AdminStore interface {
	RevokeStore
	MarkStore
	// Queue reads lock name's queue (the store's Inspect).
	Queue(ctx context.Context, name string) ([]distlock.QueueEntry, error)
	// WatchQueue calls f with lock name's queue now and after every
	// change, until ctx ends or f fails.
	WatchQueue(ctx context.Context, name string, f func([]distlock.QueueEntry) error) error
}

// Admin is the admin handle of one store, client and prefix, which
// etcdlock.Admin and zklock.Admin forward to: each call checks the lock
// name, and says what failed naming the backend package once.
type Admin struct {
	st     AdminStore
	holder string // the Holder of the markers its Marks write by default
}

// NewAdmin returns the Admin of st, whose Marks fill in holder as a
// marker's Holder when the caller gives none.
func NewAdmin(st AdminStore, holder string) *Admin { return &Admin{st: st, holder: holder} }

// Inspect returns lock name's queue.
func (a *Admin) Inspect(ctx context.Context, name string) ([]distlock.QueueEntry, error) {
	if err := a.st.Backend().ValidateName(name); err != nil {
		return nil, err
	}
	q, err := a.st.Queue(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("%s: inspect %q: %w", a.st.Backend().Pkg, name, err)
	}
	return q, nil
}

// WatchQueue calls f with lock name's queue now and after every change.
func (a *Admin) WatchQueue(ctx context.Context, name string, f func([]distlock.QueueEntry) error) error {
	if err := a.st.Backend().ValidateName(name); err != nil {
		return err
	}
	if err := a.st.WatchQueue(ctx, name, f); err != nil {
		return fmt.Errorf("%s: watch queue %q: %w", a.st.Backend().Pkg, name, err)
	}
	return nil
}

// Revoke is Revoke on a's store.
func (a *Admin) Revoke(ctx context.Context, name string, r distlock.RevokeRequest) ([]distlock.Revocation, error) {
	return Revoke(ctx, a.st, name, r)
}

// Revocations is Revocations on a's store.
func (a *Admin) Revocations(ctx context.Context, name string) ([]distlock.Revocation, error) {
	return Revocations(ctx, a.st, name)
}

// Marks returns the done-markers of lock name.
func (a *Admin) Marks(name string) (*Marks, error) {
	if err := a.st.Backend().ValidateName(name); err != nil {
		return nil, err
	}
	return &Marks{st: a.st, name: name, holder: a.holder}, nil
}
