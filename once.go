package distlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"
)

// Once runs a job once per slot across a fleet (package schedule names
// slots by time): every instance calls it for the slot that is due, and
// the first to hold the lock runs fn; the others, once they hold it, find
// the slot's done-marker and return without running fn. It is what the
// distlock once command does, as a library.
//
// The logic lives here, once, and the markers' storage in the backends
// (etcdlock.NewMarks, zklock.NewMarks) behind the SlotMarks interface:
// writing a marker safely needs the backend's own transaction (the fence
// check, the lock entry's existence and the marker's creation in one
// step), and the root package cannot import the backends or their fences,
// which import it.

// OnceMode says when Once writes a slot's done-marker: after fn succeeded,
// or before fn runs.
type OnceMode string

// The modes of Once; the text is what a marker records.
const (
	// AtLeastOnce, the default, writes the marker only after fn returned
	// nil. A failed fn, or an instance that dies midway, leaves no
	// marker, so the next call (on any instance) runs fn again. fn may run
	// more than once for a slot if the lock is lost between its end and
	// the marker: make it safe to repeat.
	AtLeastOnce OnceMode = "at-least-once"
	// AtMostOnce writes the marker first, then runs fn. A failed fn, or an
	// instance that dies midway, still counts as done: nobody retries.
	AtMostOnce OnceMode = "at-most-once"
)

// SlotMarker is the done-marker of one slot, as stored (a JSON object
// with these fields in lower case). Markers are never deleted by distlock:
// an operator deletes one to let its slot run again.
type SlotMarker struct {
	// Slot is the slot the marker is for.
	Slot string `json:"slot"`
	// Token is the fencing token, in its text form, of the acquisition
	// that marked the slot ("unknown" for a value distlock did not write).
	// It is text, not a Token, so that a marker written by another tool or
	// version still reads.
	Token string `json:"token"`
	// Holder says who marked it (the session's holder value by default).
	Holder string `json:"holder"`
	// Mode is the mode of the run that marked it.
	Mode OnceMode `json:"mode"`
	// Marked is when it was marked, by the marking instance's clock.
	Marked time.Time `json:"marked"`
}

// String describes the marker for people: holder, token, mode and time.
func (m SlotMarker) String() string {
	return fmt.Sprintf("%s (token %s, %s, marked %s)", m.Holder, m.Token, m.Mode, m.Marked.UTC().Format(time.RFC3339))
}

// SlotMarks keeps the done-markers of the slots of one lock. The backends
// implement it (etcdlock.NewMarks, zklock.NewMarks); Once and OnceHeld
// need nothing else from the store.
type SlotMarks interface {
	// Name returns the name of the lock whose slots it keeps: Once and
	// OnceHeld refuse a lock or lease of another name, whose token the
	// fence would refuse anyway, after fn ran.
	Name() string
	// Marker returns slot's marker, or nil if the slot has none. The read
	// must see every marker written before it started (linearizable),
	// since under the lock it decides whether fn runs.
	Marker(ctx context.Context, slot string) (*SlotMarker, error)
	// Mark writes m as the marker of slot m.Slot through the lock's fence,
	// with lease's token, in one atomic step that also requires lease's
	// lock entry to still exist and the slot to have no marker yet. If the
	// slot has one, nothing is written and the error is a
	// *SlotDoneError. If the entry is gone or the fence refuses the token
	// (a newer one passed it), nothing is written and the error wraps
	// ErrLost (and the fence's reason, e.g. fencing.ErrStale).
	Mark(ctx context.Context, lease *Lease, m SlotMarker) error
}

// ErrSlotDone is matched (errors.Is) by a *SlotDoneError.
var ErrSlotDone = errors.New("slot already done")

// SlotDoneError reports a slot that already had a done-marker. Once and
// OnceHeld return it with ran false for a slot found done before fn ran.
// They return it with ran true when, after fn succeeded, the marker's
// write found one: a holder of the lock cannot have written it meanwhile
// (the fence and the lock entry's check forbid it), so it was written by
// hand or by another tool. The slot counts as done either way.
type SlotDoneError struct {
	// Name is the lock's name.
	Name string
	// Slot is the slot.
	Slot string
	// Marker is the marker found.
	Marker SlotMarker
}

// Error names the lock, the slot and who marked it done.
func (e *SlotDoneError) Error() string {
	return fmt.Sprintf("distlock: lock %s: slot %s already done by %s", quoteName(e.Name), quoteName(e.Slot), e.Marker)
}

// Is makes errors.Is(err, ErrSlotDone) true.
func (e *SlotDoneError) Is(target error) bool { return target == ErrSlotDone }

// The operations a OnceError can name besides OpValidate and OpLock.
const (
	OpCheck Op = "check" // reading a slot's marker, under the lock
	OpMark  Op = "mark"  // writing a slot's marker
)

// OnceError is a failure of Once or OnceHeld itself (not of fn, whose
// error they return as it is). It says which lock and slot, at which step,
// and whether fn ran. errors.Is sees through it: a lock lost before the
// marker was written matches ErrLost.
//
// What it means for the slot:
//   - Ran false: fn did not run. The slot is not marked, but possibly
//     after an OpMark error that is not ErrLost: the store may have
//     written the marker before the answer was lost, and the slot then
//     counts as done without fn having run (AtMostOnce's risk anyway).
//   - Ran true (only with Op OpMark, in AtLeastOnce mode): fn succeeded
//     but the slot is NOT marked done, so it may run again.
type OnceError struct {
	// Name is the lock's name.
	Name string
	// Slot is the slot.
	Slot string
	// Op is the step that failed: OpValidate (the arguments), OpLock (Once
	// acquiring the lock), OpCheck (reading the marker) or OpMark.
	Op Op
	// Ran reports whether fn ran (and, in AtLeastOnce mode, succeeded).
	Ran bool
	// Err is the cause.
	Err error
}

// Error says which step failed and whether the job ran. Where the cause
// is a LockError of the same lock (Lock's), the lock is named once, with
// that error's backend, as LockError's doc says.
func (e *OnceError) Error() string {
	lost := errors.Is(e.Err, ErrLost)
	lock, cause := "lock "+quoteName(e.Name), any(e.Err)
	if le, ok := e.Err.(*LockError); ok && le.Name == e.Name {
		lock, cause = le.lock(), le.Err
		if le.Op != e.Op {
			cause = fmt.Sprintf("%s: %v", le.Op, le.Err)
		}
	}
	switch {
	case e.Op == OpMark && e.Ran && lost:
		return fmt.Sprintf("distlock: %s lost after fn succeeded; slot %q is NOT marked done, so it may run again: %v", lock, e.Slot, cause)
	case e.Op == OpMark && e.Ran:
		return fmt.Sprintf("distlock: %s: fn succeeded, but slot %q could not be marked done, so it may run again: %v", lock, e.Slot, cause)
	case e.Op == OpMark && lost:
		return fmt.Sprintf("distlock: %s lost before slot %q was marked; fn was not run: %v", lock, e.Slot, cause)
	case e.Op == OpMark:
		return fmt.Sprintf("distlock: %s: mark slot %q: %v; fn was not run", lock, e.Slot, cause)
	case e.Op == OpCheck:
		return fmt.Sprintf("distlock: %s: read the marker of slot %q: %v; fn was not run", lock, e.Slot, cause)
	}
	return fmt.Sprintf("distlock: %s, slot %q: %s: %v; fn was not run", lock, e.Slot, e.Op, cause)
}

// Unwrap returns the cause.
func (e *OnceError) Unwrap() error { return e.Err }

// DefaultOnceTimeout bounds each of Once's requests to the store (the
// marker's read and write) unless WithOnceTimeout says otherwise.
const DefaultOnceTimeout = 10 * time.Second

// OnceOption configures Once and OnceHeld.
type OnceOption func(*onceConfig)

type onceConfig struct {
	mode    OnceMode
	holder  string
	timeout time.Duration
}

// WithOnceMode sets the mode (default AtLeastOnce).
func WithOnceMode(m OnceMode) OnceOption { return func(c *onceConfig) { c.mode = m } }

// WithOnceHolder sets the marker's Holder (default: the backend's
// choice, the session's holder value).
func WithOnceHolder(h string) OnceOption { return func(c *onceConfig) { c.holder = h } }

// WithOnceTimeout bounds each request to the store (default
// DefaultOnceTimeout). The bound matters most for the marker written after
// fn succeeded, which is not cancelled with ctx: fn's work is done, and
// a marker that a cancelled context cost would have it done again.
func WithOnceTimeout(d time.Duration) OnceOption { return func(c *onceConfig) { c.timeout = d } }

// Once acquires l (with l.Lock, so it waits), runs fn at most once for
// slot as OnceHeld describes, and always releases l. l is the lock marks
// keeps, or better the slot's own lock, SlotLockName(marks.Name(), slot)
// (see OnceHeld).
//
// It returns whether fn ran, and:
//   - nil if fn ran, succeeded and the slot is marked done (in
//     AtMostOnce mode: was marked before fn ran);
//   - a *SlotDoneError (errors.Is(err, ErrSlotDone)) if the slot was done
//     already: a success for a caller that wants the slot's work done;
//   - fn's error, as it is, if fn failed;
//   - a *OnceError for a failure of Once itself: acquiring (Op OpLock),
//     reading or writing the marker, a lock lost before the marker was
//     written (errors.Is(err, ErrLost)).
//
// The release's errors are joined to that, as Do does, but for a loss
// after an AtLeastOnce marker was written: that write proved the lock was
// still held after fn ended. (An AtMostOnce fn runs after the marker, so
// a loss during it is reported.)
func Once(ctx context.Context, l Locker, marks SlotMarks, slot string, fn func(ctx context.Context) error, opts ...OnceOption) (ran bool, err error) {
	name, _, cerr := checkOnce(marks, slot, fn, opts)
	if l == nil {
		return false, &OnceError{Name: name, Slot: slot, Op: OpValidate, Err: fmt.Errorf("%w: nil Locker", ErrNilClient)}
	}
	// A Locker that knows its name (the backends' Mutex) is checked
	// before waiting for it; any other is checked by OnceHeld, by its
	// lease's token.
	if n, ok := l.(interface{ Name() string }); ok && marks != nil && n.Name() != name && n.Name() != SlotLockName(name, slot) {
		return false, &OnceError{Name: name, Slot: slot, Op: OpValidate, Err: fmt.Errorf("the marks are lock %q's, the Locker is lock %q (neither that lock nor slot %q's lock %q)", name, n.Name(), slot, SlotLockName(name, slot))}
	}
	if cerr != nil {
		return false, cerr
	}
	lease, err := l.Lock(ctx)
	if err != nil {
		return false, &OnceError{Name: name, Slot: slot, Op: OpLock, Err: err}
	}
	var proven bool
	defer func() {
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
		defer ucancel()
		uerr := lease.Unlock(uctx)
		if proven && errors.Is(uerr, ErrLost) {
			return
		}
		err = errors.Join(err, uerr)
	}()
	ran, proven, err = onceHeld(ctx, lease, marks, slot, fn, opts)
	return ran, err
}

// OnceHeld is Once for a caller that holds the lock already (it shows
// progress while waiting, say, or runs several slots in one acquisition);
// it does not release lease. lease must be of the lock marks keeps, or of
// the slot's own lock, SlotLockName(marks.Name(), slot).
//
// A lease of the slot's lock is what a scheduled job should hold (the
// distlock once command and gocronlock do): a runner killed mid-run then
// delays only its own slot, by its session's TTL, until its entry is gone
// and the next instance waiting for that slot's lock finds no marker and
// runs the slot again (AtLeastOnce: in distlock's crash tests 1.6-2.2 s
// after the kill with a 2 s etcd TTL, 0.7-1.1 s with a ZooKeeper session
// timeout of 0.8-1 s) or finds the marker and skips it (AtMostOnce); the
// next slot takes another lock, which nobody holds. The waiters must wait
// longer than the TTL, and no longer than the slot lasts. The
// marker is then written atomically with a check that the slot lock's
// entry still exists, without the job lock's fence (whose single token
// sequence the slot locks do not share). With one lock for every slot, a
// killed runner's entry would block every later slot's lock until its
// session expired.
//
// Under the lock it reads slot's marker; if there is one, it returns
// false and a *SlotDoneError. Otherwise it runs fn and marks the slot, in
// the order the mode says. The marker is written through the lock's
// fence with lease's token, atomically with a check that lease's entry
// still exists: a holder that lost the lock (paused, cut off, session
// expired) cannot mark the slot, even before it noticed.
//
// fn's context is cancelled when ctx is, and also when the lock is lost;
// context.Cause then tells why. fn's error is returned as it is; in
// AtLeastOnce mode the slot then stays unmarked, in AtMostOnce mode it
// stays marked. The results are Once's.
func OnceHeld(ctx context.Context, lease *Lease, marks SlotMarks, slot string, fn func(ctx context.Context) error, opts ...OnceOption) (ran bool, err error) {
	ran, _, err = onceHeld(ctx, lease, marks, slot, fn, opts)
	return ran, err
}

// checkOnce checks the arguments of Once and OnceHeld but the lock's, and
// returns the marks' lock name and the options' configuration.
func checkOnce(marks SlotMarks, slot string, fn func(context.Context) error, opts []OnceOption) (string, onceConfig, error) {
	name, c := "", onceConfig{mode: AtLeastOnce, timeout: DefaultOnceTimeout}
	if marks != nil {
		name = marks.Name()
	}
	for _, o := range opts {
		o(&c)
	}
	var err error
	switch {
	case marks == nil:
		err = fmt.Errorf("%w: nil SlotMarks", ErrNilClient)
	case fn == nil:
		err = errors.New("nil fn")
	case c.mode != AtLeastOnce && c.mode != AtMostOnce:
		err = fmt.Errorf("unknown mode %q (want %q or %q)", c.mode, AtLeastOnce, AtMostOnce)
	case c.timeout <= 0:
		err = fmt.Errorf("timeout %v: want a positive duration", c.timeout)
	default:
		err = ValidateSlot(slot)
	}
	if err != nil {
		return name, c, &OnceError{Name: name, Slot: slot, Op: OpValidate, Err: err}
	}
	return name, c, nil
}

// onceHeld is OnceHeld, also saying whether the lock was proven held
// until after fn ended: by an AtLeastOnce marker written after it.
func onceHeld(ctx context.Context, lease *Lease, marks SlotMarks, slot string, fn func(context.Context) error, opts []OnceOption) (ran, proven bool, err error) {
	name, c, err := checkOnce(marks, slot, fn, opts)
	fail := func(op Op, ran bool, err error) (bool, bool, error) {
		return ran, false, &OnceError{Name: name, Slot: slot, Op: op, Ran: ran, Err: err}
	}
	switch {
	case err != nil:
		return false, false, err
	case lease == nil:
		return fail(OpValidate, false, errors.New("nil Lease"))
	case lease.Token().Name != name && lease.Token().Name != SlotLockName(name, slot):
		return fail(OpValidate, false, fmt.Errorf("the marks are lock %q's, the lease is lock %q's (neither that lock's nor slot %q's lock %q)", name, lease.Token().Name, slot, SlotLockName(name, slot)))
	}

	// The read ends with the lock: a marker read by a holder that lost the
	// lock decides nothing.
	rctx, rcancel := context.WithTimeout(ctx, c.timeout)
	stopRead := context.AfterFunc(lease.Context(), rcancel)
	prev, err := marks.Marker(rctx, slot)
	stopRead()
	rcancel()
	if err := cmp.Or(lease.Err(), err); err != nil { // a loss first
		return fail(OpCheck, false, err)
	}
	if prev != nil {
		return false, false, &SlotDoneError{Name: name, Slot: slot, Marker: *prev}
	}

	// mark writes the marker, fn having run or not: a *SlotDoneError is
	// returned as it is.
	mark := func(ctx context.Context, ran bool) (bool, bool, error) {
		mctx, mcancel := context.WithTimeout(ctx, c.timeout)
		defer mcancel()
		err := marks.Mark(mctx, lease, SlotMarker{Slot: slot, Token: lease.Token().String(), Holder: c.holder, Mode: c.mode, Marked: time.Now().UTC()})
		if _, done := errors.AsType[*SlotDoneError](err); err == nil || done {
			return ran, ran && err == nil, err
		}
		return fail(OpMark, ran, err)
	}
	run := func() error {
		fctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		defer context.AfterFunc(lease.Context(), func() { cancel(lease.Err()) })()
		return fn(fctx)
	}

	if c.mode == AtMostOnce {
		if ran, _, err := mark(ctx, false); err != nil {
			return ran, false, err
		}
		return true, false, run()
	}
	if err := run(); err != nil {
		return true, false, err // no marker: the next call tries again
	}
	// fn's work is done: mark it even if ctx ended meanwhile.
	return mark(context.WithoutCancel(ctx), true)
}
