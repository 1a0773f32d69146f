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
// recipe.Admin and recipe.Admin forward to: each call checks the lock
// name, and names the backend once in its errors. Revoke and
// Revocations are in revoke.go.
type Admin struct {
	st     AdminStore
	holder string // the Holder of the markers its Marks write by default
}

// NewAdmin returns the Admin of st, whose Marks fill in holder as a
// marker's Holder when the caller gives none.
func NewAdmin(st AdminStore, holder string) *Admin { return &Admin{st: st, holder: holder} }

// Inspect returns lock name's queue.
func (a *Admin) Inspect(ctx context.Context, name string) (q []distlock.QueueEntry, err error) {
	err = a.do("inspect", name, func() error {
		if q, err = a.st.Queue(ctx, name); err != nil {
			return err
		}
		return a.markLeader(ctx, name, q)
	})
	return q, err
}

// WatchQueue calls f with lock name's queue now and after every change.
func (a *Admin) WatchQueue(ctx context.Context, name string, f func([]distlock.QueueEntry) error) error {
	return a.do("watch queue", name, func() error {
		return a.st.WatchQueue(ctx, name, func(q []distlock.QueueEntry) error {
			if err := a.markLeader(ctx, name, q); err != nil {
				return err
			}
			return f(q)
		})
	})
}

// markLeader marks, among q's entries, the candidates of election name:
// only the one the term record names holds, with its term's token.
func (a *Admin) markLeader(ctx context.Context, name string, q []distlock.QueueEntry) error {
	var (
		es   ElectionState
		read bool
	)
	for i := range q {
		if q[i].Kind != distlock.Candidate {
			continue
		}
		if !read {
			var err error
			if es, err = a.st.ReadElection(ctx, name); err != nil {
				return err
			}
			read = true
		}
		// Only the candidate the record names leads; one gone since the
		// queue's read does not (the two reads are not one snapshot).
		q[i].Holding = false
		if l, ok := es.leader(); ok && l.Key == q[i].Key {
			q[i].Holding, q[i].Seq, q[i].Token.Seq = true, l.Seq, es.Term
		}
	}
	return nil
}

// do runs f, what on lock name, once the name is valid; f's error is the
// backend package's, since an admin read is no operation on a lock.
func (a *Admin) do(what, name string, f func() error) error {
	if err := a.st.Backend().ValidateName(name); err != nil {
		return err
	}
	if err := f(); err != nil {
		return fmt.Errorf("%s: %s %q: %w", a.st.Backend().Pkg, what, name, err)
	}
	return nil
}

// Marks returns the done-markers of lock name.
func (a *Admin) Marks(name string) (*Marks, error) {
	if err := a.st.Backend().ValidateName(name); err != nil {
		return nil, err
	}
	return &Marks{a: a, name: name}, nil
}
