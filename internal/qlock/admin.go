package qlock

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/distlock/distlock"
)

// AdminStore is what a store does for an Admin, on a client and prefix
// (an admin holds nothing): read and follow a lock's whole queue, keep its
// revocation records and its done-markers. ReadQueue is ClientStore's.
type AdminStore interface {
	ClientStore
	MarkStore
	// FindMulti sets the Multi of those of q's entries (lock name's queue,
	// as ReadQueue reads it) that are a multi-lock's, where the store can
	// find the acquisition's other entries; a store that cannot leaves
	// them nil.
	FindMulti(ctx context.Context, name string, q []distlock.QueueEntry) error
	// WatchQueue calls f with lock name's queue (as ReadQueue reads it)
	// now and after every change, until ctx ends or f fails.
	WatchQueue(ctx context.Context, name string, f func([]distlock.QueueEntry) error) error
}

// Admin is the admin handle of one store, client and prefix, which
// recipe.Admin forwards to: each call checks the lock
// name, and names the backend once in its errors. Revoke and
// Revocations are in revoke.go.
type Admin struct {
	st     AdminStore
	holder string // the Holder of the markers its Marks write by default
}

// NewAdmin returns the Admin of st, whose Marks fill in holder as a
// marker's Holder when the caller gives none.
func NewAdmin(st AdminStore, holder string) *Admin { return &Admin{st: st, holder: holder} }

// Inspect returns lock name's queue (see distlock.QueueEntry): the
// store's read, completed by complete.
func (a *Admin) Inspect(ctx context.Context, name string) (q []distlock.QueueEntry, err error) {
	err = a.do("inspect", name, func() error {
		if q, err = a.st.ReadQueue(ctx, name); err != nil {
			return err
		}
		q, err = a.complete(ctx, name, q)
		return err
	})
	return q, err
}

// WatchQueue calls f with lock name's queue, as Inspect returns it, now
// and after every change.
func (a *Admin) WatchQueue(ctx context.Context, name string, f func([]distlock.QueueEntry) error) error {
	return a.do("watch queue", name, func() error {
		return a.st.WatchQueue(ctx, name, func(q []distlock.QueueEntry) error {
			q, err := a.complete(ctx, name, q)
			if err != nil {
				return err
			}
			return f(q)
		})
	})
}

// complete makes q, lock name's queue as the store read it, what an
// inspection shows: the election's leader marked, a multi-lock's entries
// named, and the queues in order with their entries' Positions.
func (a *Admin) complete(ctx context.Context, name string, q []distlock.QueueEntry) ([]distlock.QueueEntry, error) {
	if err := a.markLeader(ctx, name, q); err != nil {
		return nil, err
	}
	if err := a.st.FindMulti(ctx, name, q); err != nil {
		return nil, err
	}
	return inOrder(q), nil
}

// inOrder returns q (the store's read: each queue's entries oldest first,
// a semaphore's holders in slot order before its waiters) as an
// inspection lists it: the semaphore's entries, the lock's, then the
// election's candidates in the order they lead, each queue numbered from
// 1 (QueueEntry.Position).
func inOrder(q []distlock.QueueEntry) []distlock.QueueEntry {
	group := func(e distlock.QueueEntry) int {
		switch e.Kind {
		case distlock.Counted:
			return 0
		case distlock.Candidate:
			return 2
		}
		return 1
	}
	out := slices.Clone(q)
	slices.SortStableFunc(out, func(x, y distlock.QueueEntry) int {
		if c := cmp.Compare(group(x), group(y)); c != 0 || group(x) != 2 {
			return c
		}
		// The leader first, then the order of the next terms (as
		// ElectionState.next picks them): the highest priority first,
		// the oldest among equals (the read's order).
		if x.Holding != y.Holding {
			if x.Holding {
				return -1
			}
			return 1
		}
		return cmp.Compare(y.Priority, x.Priority)
	})
	// A key of no known client has no place (Position 0).
	var pos [3]int
	for i := range out {
		if out[i].Client == distlock.ClientUnknown {
			out[i].Position = 0
			continue
		}
		pos[group(out[i])]++
		out[i].Position = pos[group(out[i])]
	}
	return out
}

// markLeader marks, among q's entries, the candidates of election name:
// only the one the term record names holds, with its term's token.
func (a *Admin) markLeader(ctx context.Context, name string, q []distlock.QueueEntry) error {
	var (
		es   ElectionState
		read bool
	)
	for i := range q {
		if q[i].Kind != distlock.Candidate || q[i].Client != "" {
			continue // a foreign candidate's Holding is the store's
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
