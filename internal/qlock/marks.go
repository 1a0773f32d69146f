package qlock

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
)

// MarkStore is what a store does for the done-markers of a lock's slots
// (distlock.Once), on a client: it keeps the bytes; their JSON, the
// checks, the fenced write's rule and the errors are Marks', once.
type MarkStore interface {
	// Marker returns slot's marker of lock name; ok is false if it has
	// none. The read sees every marker written before it started.
	Marker(ctx context.Context, name, slot string) (value []byte, ok bool, err error)
	// Mark creates slot's marker of lock name with token tok, in one
	// atomic step that also requires tok's lock entry to exist and slot
	// to have no marker. tok is of lock name itself, or of the slot's own
	// lock (distlock.SlotLockName(name, slot)):
	//   - a token of lock name is written through name's fence, which
	//     refuses a token older than one it passed (a holder that lost
	//     the job lock and did not notice yet);
	//   - a token of the slot lock is not: every slot lock has a fence
	//     token sequence of its own, and one fence shared by the slot
	//     locks would refuse an older slot's rerun once a newer slot
	//     marked. Its entry's existence is the whole check, and it is
	//     enough: each slot lock has its own FIFO queue, whose entry is
	//     deleted when its holder releases it or its session ends, so an
	//     entry that still exists with tok's revision (etcd: create
	//     revision and lease; ZooKeeper: the node found by its czxid)
	//     is the holder's.
	// An error wraps distlock.ErrLost if the entry is gone, the fence's
	// error if it refused tok, and distlock.ErrSlotDone if slot had a
	// marker: prev is then its value, nil if it could not be read.
	Mark(ctx context.Context, name, slot string, tok distlock.Token, value []byte) (prev []byte, err error)
	// Markers returns how many markers lock name has, and the values of
	// the newest n by slot name, newest first.
	Markers(ctx context.Context, name string, n int) (total int, newest [][]byte, err error)
	// PruneMarkers deletes lock name's markers of the slots that sort
	// before before, and returns how many it deleted.
	PruneMarkers(ctx context.Context, name, before string) (int, error)
}

// Marks is the done-markers of one lock's slots on a MarkStore: what
// recipe.Marks forwards to (distlock.SlotMarks).
type Marks struct {
	a    *Admin // its store, and the Holder of markers that give none
	name string
}

// Name returns the lock's name.
func (m *Marks) Name() string { return m.name }

// fail is the error of op (distlock.OpCheck, OpMark) on m's lock:
// OnceError names the lock and the slot once around it.
func (m *Marks) fail(op distlock.Op, err error) error {
	return &distlock.LockError{Backend: m.a.st.Backend().Name, Name: m.name, Op: op, Err: err}
}

// Marker returns slot's marker, or nil if it has none.
func (m *Marks) Marker(ctx context.Context, slot string) (*distlock.SlotMarker, error) {
	if err := distlock.ValidateSlot(slot); err != nil {
		return nil, m.fail(distlock.OpCheck, err)
	}
	v, ok, err := m.a.st.Marker(ctx, m.name, slot)
	if err != nil {
		return nil, m.fail(distlock.OpCheck, fmt.Errorf("read the marker of slot %q: %w", slot, err))
	}
	if !ok {
		return nil, nil
	}
	mk := parseMarker(v)
	return &mk, nil
}

// Mark writes mk as the marker of slot mk.Slot with lease's token, as
// distlock.SlotMarks says. An empty mk.Holder is filled in with m's
// holder (a session's holder value), or else the host name and process
// ID.
func (m *Marks) Mark(ctx context.Context, lease *distlock.Lease, mk distlock.SlotMarker) error {
	fail := func(err error) error { return m.fail(distlock.OpMark, err) }
	switch {
	case lease == nil:
		return fail(errors.New("nil Lease"))
	}
	if err := distlock.ValidateSlot(mk.Slot); err != nil {
		return fail(err)
	}
	// The lease is of the job lock (Once's callers that hold it) or of
	// the slot's own lock (gocronlock, distlock once): the store writes
	// through the job lock's fence for the first, and for the second
	// checks only that the slot lock's entry still exists (see
	// MarkStore.Mark).
	if n := lease.Token().Name; n != m.name && n != distlock.SlotLockName(m.name, mk.Slot) {
		return fail(fmt.Errorf("the lease is lock %q's, neither the job's nor slot %q's lock %q", n, mk.Slot, distlock.SlotLockName(m.name, mk.Slot)))
	}
	if mk.Holder == "" {
		host, _ := os.Hostname()
		mk.Holder = cmp.Or(m.a.holder, fmt.Sprintf("%s pid %d", host, os.Getpid()))
	}
	if err := lease.Err(); err != nil {
		return fail(fmt.Errorf("%w: %w", distlock.ErrLost, inner(err)))
	}
	value, err := json.Marshal(mk)
	if err != nil {
		return fail(err)
	}
	prev, err := m.a.st.Mark(ctx, m.name, mk.Slot, lease.Token(), value)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, distlock.ErrSlotDone):
		done := distlock.SlotMarker{Holder: "another run", Token: "unknown", Mode: "unknown mode"}
		if prev != nil {
			done = parseMarker(prev)
		}
		return &distlock.SlotDoneError{Name: m.name, Slot: mk.Slot, Marker: done}
	case !errors.Is(err, distlock.ErrLost) && (errors.Is(err, fencing.ErrStale) || errors.Is(err, fencing.ErrFork)):
		// A newer token passed the fence: the lock is someone else's.
		return fail(fmt.Errorf("%w: %w", distlock.ErrLost, err))
	}
	return fail(err)
}

// Markers returns how many markers the lock has, and the newest n of
// them by slot name, newest first.
func (m *Marks) Markers(ctx context.Context, n int) (total int, newest []distlock.SlotMarker, err error) {
	var vs [][]byte
	err = m.a.do("markers of", m.name, func() error { total, vs, err = m.a.st.Markers(ctx, m.name, n); return err })
	for _, v := range vs {
		newest = append(newest, parseMarker(v))
	}
	return total, newest, err
}

// Prune deletes the markers of the slots that sort before before, and
// returns how many it deleted.
func (m *Marks) Prune(ctx context.Context, before string) (n int, err error) {
	err = m.a.do("prune markers of", m.name, func() error { n, err = m.a.st.PruneMarkers(ctx, m.name, before); return err })
	return n, err
}

// parseMarker reads a stored marker. A value that is not a marker
// distlock wrote (someone created the key or znode by hand) still marks
// its slot done: it is described as it is, with token "unknown", so that
// a run that finds it can say what it found.
func parseMarker(value []byte) distlock.SlotMarker {
	var m distlock.SlotMarker
	if err := json.Unmarshal(value, &m); err != nil || m.Token == "" {
		return distlock.SlotMarker{Holder: fmt.Sprintf("%q", value), Token: "unknown", Mode: "unknown mode"}
	}
	return m
}
