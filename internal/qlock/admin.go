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
// 1 (QueueEntry.Position), and last the children of unknown clients,
// which are in no queue (Position 0).
func inOrder(q []distlock.QueueEntry) []distlock.QueueEntry {
	group := func(e distlock.QueueEntry) int {
		switch {
		case e.Client == distlock.ClientUnknown:
			return 3
		case e.Kind == distlock.Counted:
			return 0
		case e.Kind == distlock.Candidate:
			return 2
		}
		return 1
	}
	out := slices.Clone(q)
	slices.SortStableFunc(out, func(x, y distlock.QueueEntry) int { return cmp.Compare(group(x), group(y)) })
	lo := slices.IndexFunc(out, func(e distlock.QueueEntry) bool { return group(e) >= 2 })
	if lo >= 0 {
		hi := slices.IndexFunc(out[lo:], func(e distlock.QueueEntry) bool { return group(e) > 2 })
		if hi < 0 {
			hi = len(out) - lo
		}
		leadOrder(out[lo : lo+hi])
	}
	for i := range out {
		switch {
		case group(out[i]) == 3:
			out[i].Position, out[i].Holding = 0, false
		case i > 0 && group(out[i-1]) == group(out[i]):
			out[i].Position = out[i-1].Position + 1
		default:
			out[i].Position = 1
		}
	}
	return out
}

// leadOrder puts an election's candidates cs (oldest first) in the order
// they lead: the leader first, then the order of the next terms as
// ElectionState.next picks them: among the candidates that no foreign
// candidate is older than, the highest priority first, the oldest among
// equals; when there is none, the oldest foreign candidate, which leads
// by its own client's rule (the oldest leads).
func leadOrder(cs []distlock.QueueEntry) {
	pos := func(e distlock.QueueEntry) int64 { return cmp.Or(e.Seq, e.Token.Seq) }
	rest := slices.Clone(cs)
	out := cs[:0:len(cs)]
	if i := slices.IndexFunc(rest, func(e distlock.QueueEntry) bool { return e.Holding }); i >= 0 {
		out = append(out, rest[i])
		rest = slices.Delete(rest, i, i+1)
	}
	for len(rest) > 0 {
		f := slices.IndexFunc(rest, func(e distlock.QueueEntry) bool { return e.Client != "" })
		best := -1
		for i, e := range rest {
			if e.Client != "" || f >= 0 && pos(rest[f]) < pos(e) {
				continue
			}
			if b := rest[max(best, 0)]; best < 0 || e.Priority > b.Priority || e.Priority == b.Priority && pos(e) < pos(b) {
				best = i
			}
		}
		if best < 0 {
			best = f
		}
		out = append(out, rest[best])
		rest = slices.Delete(rest, best, best+1)
	}
}

// markLeader marks, among q's entries, the candidates of election name:
// only the one the term record names holds, with its term's token. While
// the record names no live candidate, the oldest candidate, if it is a
// foreign one, holds: its client's rule makes it the leader.
func (a *Admin) markLeader(ctx context.Context, name string, q []distlock.QueueEntry) error {
	var (
		es   ElectionState
		read bool
	)
	for i := range q {
		if q[i].Kind != distlock.Candidate || q[i].Client == distlock.ClientUnknown {
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
		l, led := es.leader()
		switch {
		case led && l.Key == q[i].Key:
			q[i].Holding, q[i].Seq, q[i].Token.Seq = true, l.Seq, es.Term
		case !led && q[i].Client != "":
			q[i].Holding = es.foreignLeads(q[i].Key)
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

// foreignLeads reports whether the foreign candidate with key is the
// oldest of all of s's candidates: what its client takes for the leader,
// while no term record names a live candidate (an inspection's view).
func (s ElectionState) foreignLeads(key string) bool {
	if len(s.Foreign) == 0 || s.Foreign[0].Key != key {
		return false
	}
	for _, c := range s.Contenders {
		if c.Seq < s.Foreign[0].Seq {
			return false
		}
	}
	return true
}
