package recipe

import (
	"context"
	"fmt"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
)

// Admin reads and manages the locks under one prefix of a store without
// holding any: their queues (Inspect, WatchQueue), revocations of their
// holders (Revoke, Revocations) and the done-markers of their slots
// (Marks). It comes from etcdlock.NewAdmin or zklock.NewAdmin, whose
// documentation says where it keeps its records. An Admin is safe for
// concurrent use.
type Admin struct{ q *qlock.Admin }

// Inspect returns the queue of the lock called name, without joining it,
// as one consistent snapshot: the semaphore's entries of that name, then
// the lock's (Mutex, RWMutex and MultiMutex entries, holders first), then
// the Election's candidates in the order they would lead, each queue in
// QueueEntry.Position order; QueueEntry.Holding says which hold, and an
// election's leader (the one the term record names) has its term's token.
// An empty result means nobody holds or waits. See distlock.QueueEntry for
// what each field says on each store.
func (a *Admin) Inspect(ctx context.Context, name string) ([]distlock.QueueEntry, error) {
	return a.q.Inspect(ctx, name)
}

// WatchQueue calls f with the queue of the lock called name (as Inspect
// reads it) now and again after every change, until ctx ends (it returns
// ctx's cause), f returns an error (it returns that) or the watch fails.
// The watch is set before each read, so no change is missed; changes that
// come while f runs are read once, together.
func (a *Admin) WatchQueue(ctx context.Context, name string, f func([]distlock.QueueEntry) error) error {
	return a.q.WatchQueue(ctx, name, f)
}

// Revoke asks the holders of the lock called name (a Mutex's or writer's
// holder, every reader holding, every permit of a semaphore, and the
// leader of the Election of that name) to let go: it records a revocation
// per holder, which revocable holders (the stores' WithRevocable) see as
// their Lease's Done closing with a *distlock.RevokedError, and waits
// until they release or r.Grace is over; then, with r.Force, deletes the
// entries of those still there, each only if it is still that holder's. A
// forced holder sees distlock.ErrEntryGone.
//
// It returns each holder's record with its outcome; none when the lock is
// free. A holder revoked already is not asked again (its record has Again
// set), and is forced (r.Force) once its first grace period or r.Grace is
// over, whichever ends first. The newest 100 records per lock are kept as
// the audit trail. Errors are *distlock.LockError values (Op
// distlock.OpRevoke; OpValidate for a bad name).
func (a *Admin) Revoke(ctx context.Context, name string, r distlock.RevokeRequest) ([]distlock.Revocation, error) {
	return a.q.Revoke(ctx, name, r)
}

// Revocations returns the revocation records of the lock called name, in
// the order they were requested: pending ones and past ones. A pending
// record whose holder is gone, its revoker having stopped before it
// recorded the outcome, says distlock.RevokeEnded.
func (a *Admin) Revocations(ctx context.Context, name string) ([]distlock.Revocation, error) {
	return a.q.Revocations(ctx, name)
}

// Marks returns the done-markers of the lock called name (for
// distlock.Once); an invalid name is an error wrapping
// distlock.ErrInvalidName.
func (a *Admin) Marks(name string) (*Marks, error) {
	q, err := a.q.Marks(name)
	if err != nil {
		return nil, err
	}
	return &Marks{q}, nil
}

// Marks keeps the done-markers of one lock's slots for distlock.Once,
// beside the lock's queue and bound to no session: they outlive the
// session that wrote them. A Marks is safe for concurrent use.
type Marks struct{ q *qlock.Marks }

// NewMarks returns the done-markers of the locks the session s takes
// called name: on s's client, under s's prefix, with s's holder value as a
// marker's default Holder (and, on ZooKeeper, s's ACL). A job holds its
// lock through a Session, so it needs no Admin for its markers;
// Admin.Marks is for tools that hold nothing.
func NewMarks(s Backend, name string) (*Marks, error) {
	ss, err := session(s, "marks", name)
	if err != nil {
		return nil, err
	}
	if ss.admin == nil {
		return nil, fmt.Errorf("distlock: new marks %q: %w: the session has no store", name, distlock.ErrNilClient)
	}
	return (&Admin{ss.admin()}).Marks(name)
}

// Name returns the lock's name.
func (m *Marks) Name() string { return m.q.Name() }

// Marker returns slot's marker, or nil if it has none. The read is
// linearizable. Its errors are *distlock.LockError values of Op
// distlock.OpCheck.
func (m *Marks) Marker(ctx context.Context, slot string) (*distlock.SlotMarker, error) {
	return m.q.Marker(ctx, slot)
}

// Mark writes mk as the marker of slot mk.Slot, as distlock.SlotMarks
// says, in one write through the fence that also requires lease's entry
// to be the one that holds. An empty mk.Holder becomes the session's
// holder value (NewMarks), or else the host name and process ID. Errors
// other than a *distlock.SlotDoneError are *distlock.LockError values of
// Op distlock.OpMark.
func (m *Marks) Mark(ctx context.Context, lease *distlock.Lease, mk distlock.SlotMarker) error {
	return m.q.Mark(ctx, lease, mk)
}

// Markers returns how many done-markers the lock has, and the newest n of
// them by slot name, newest first (slots named by time sort by time): what
// distlock status shows.
func (m *Marks) Markers(ctx context.Context, n int) (total int, newest []distlock.SlotMarker, err error) {
	return m.q.Markers(ctx, n)
}

// Prune deletes the markers of the slots that sort before slot before (for
// slots named by time: the older ones), and returns how many it deleted.
// Markers are never deleted otherwise; a job that runs every second leaves
// 86,400 a day (gocronlock prunes them).
func (m *Marks) Prune(ctx context.Context, before string) (int, error) { return m.q.Prune(ctx, before) }
