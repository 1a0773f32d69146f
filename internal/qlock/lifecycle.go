package qlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
)

// The life cycle of one acquisition, start to end. This file is the one
// place that says what happens to an entry; the store drivers (etcdq,
// zkq) only carry out the store's part of each step.
//
//  1. acquire checks the session and the context, then the driver's
//     Enqueue creates the entry and returns the queue it saw: one Txn on
//     etcd (put guarded by the session's guard key, and a range read);
//     a sequential create, then a listing and the entry's own Stat on
//     ZooKeeper.
//  2. The engine starts following the entry (Follow): if anyone but its
//     owner deletes it, or the session ends, the acquisition fails while
//     waiting and is lost while held.
//  3. The waiter's view of the queue is the snapshot the enqueue took, of
//     the entries older than its own that it conflicts with, the newest
//     few only (Queue). It can only shrink: nothing ever joins ahead; when
//     the few it knows are gone and older ones may be left, one read says
//     which. The waiter waits on one entry at a time, the nearest one it
//     conflicts with (Rule.Waits), and watches that entry alone (WaitGone).
//     When it goes, the driver may already know that nothing older is
//     left (on ZooKeeper a holder's release marks itself with a data
//     change); otherwise, if older entries may be left, one read
//     refreshes the view (Survivors). A handoff's cost therefore does not
//     grow with the queue: one write (the release), one event (the
//     waiter's watch) and at most one read of the survivors. With a
//     lock-delay, a waiter whose last predecessor went without its
//     holder's release then waits the delay (see owedDelay).
//  4. Confirm is the last look before "acquired": whatever the store's
//     watches may not have delivered yet (on etcd, for an entry that
//     waited, one read that it outlived its last predecessor).
//  5. hold turns the entry into a distlock.Lease whose Done closes when the
//     entry is lost (step 2's signal) or released; the recipe adds its
//     own part through hooks (a semaphore's permit: semaphore.go).
//  6. release (Lease.Unlock) deletes the entry only if it is still this
//     acquisition's, and reports a loss that came first.
//  7. On every failure after step 1, abandon deletes the entry before the
//     call returns (within a bound; then in the background), so that a
//     failed Lock never leaves an entry that blocks the queue. Step 1 is
//     the driver's own: an enqueue whose outcome is unknown is cleaned up
//     inside Enqueue, by the store's means (etcd: the guard key; ZooKeeper:
//     the entry's GUID). A waiter that gives up while it serves a
//     lock-delay, on etcd, deletes its entry at the delay's end (giveUp).

// Engine runs acquisitions on one session: its state, which the engine
// keeps, and its store's driver, which does the store's part.
type Engine struct {
	st *State
	d  Store
}

// New returns the engine of the session with state st on store driver d.
func New(st *State, d Store) *Engine { return &Engine{st: st, d: d} }

// Lost returns an error that matches both distlock.ErrLost and reason with
// errors.Is, for reporting why a held lock was lost; Lost(nil) is ErrLost
// itself.
func Lost(reason error) error {
	if reason == nil {
		return distlock.ErrLost
	}
	if errors.Is(reason, distlock.ErrLost) {
		return reason
	}
	return fmt.Errorf("%w: %w", distlock.ErrLost, reason)
}

// acquire enqueues r in lock name's queue and waits until its entry holds
// (steps 1 to 4). On failure nothing is left behind. qs says what it saw
// of the queue, on failure too.
func (e *Engine) acquire(ctx context.Context, name string, r Request) (_ *Node, qs queueStats, _ error) {
	ctx, done, fail, err := e.start(ctx, name, r.Op)
	defer done()
	if err != nil {
		return nil, qs, err
	}

	n, all, more, err := e.d.Enqueue(ctx, name, r)
	if err != nil {
		return nil, qs, fail(err)
	}
	n.Name = name
	e.follow(n)

	q := NewQueue(n.Entry, all, more)
	qs = queueStats{enqueued: true, ahead: len(q.ahead), partial: more}
	w, waits := q.Next()
	// A view that must read first waits too: a partial read (one that an
	// enqueue retry made, with entries newer than this one among the
	// newest) may know nothing ahead of this entry although older ones
	// exist.
	_, must := q.MustRead()
	n.Waited = waits || must
	if r.Try && n.Waited {
		// A store that cannot compare and create at once (ZooKeeper) finds
		// out only now that an entry made meanwhile is ahead.
		err := fmt.Errorf("%w (entries ahead)", distlock.ErrLocked)
		if waits {
			err = fmt.Errorf("%w (entry %s)", distlock.ErrLocked, w.Key)
		}
		e.abandon(n, err)
		return nil, qs, fail(err)
	}
	if n.Waited {
		e.st.log.Debug(e.st.backend.Pkg+": enqueued", "lock", name, "key", n.Key, "ahead", qs.ahead)
		qs.waitedOn, err = e.wait(ctx, n, q)
		qs.delayed = n.lockDelay
		if err != nil {
			e.giveUp(n, err)
			return nil, qs, fail(err)
		}
	}
	if err := e.d.Confirm(ctx, n); err != nil {
		e.abandon(n, err)
		return nil, qs, fail(err)
	}
	e.st.log.Debug(e.st.backend.Pkg+": acquired", "lock", name, "key", n.Key, "token", n.Token)
	return n, qs, nil
}

// follow starts n's life under the session and has the driver follow
// its entry (step 2).
func (e *Engine) follow(n *Node) {
	st := e.st
	n.Begin(st.Context())
	if st.Err() != nil {
		n.kill(st.Err())
	}
	e.d.Follow(n, n.lose)
}

// start begins an acquisition of lock name: it checks the session and
// ctx, and returns a context that also ends with the session (its
// requests stop then), done to call when the acquisition is over, and
// fail, which wraps an error in the acquisition's LockError (as err is
// already).
func (e *Engine) start(ctx context.Context, name string, op distlock.Op) (_ context.Context, done func(), fail func(error) error, err error) {
	fail = func(err error) error { return e.fail(name, op, err) }
	st := e.st
	if err := st.Err(); err != nil {
		return ctx, func() {}, fail, fail(err)
	}
	if err := ctx.Err(); err != nil {
		return ctx, func() {}, fail, fail(context.Cause(ctx))
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(st.Context(), func() { cancel(st.Err()) })
	return ctx, func() { stop(); cancel(nil) }, fail, nil
}

// wait blocks until q says its owner holds the lock, waiting on one entry
// at a time (step 3), and returns how many it waited on. When n's entry
// ends (deleted, session over) the wait fails with that cause, which also
// wins over "acquired": the watch on n's own entry may run behind the one
// on the entry it waits for, which is why Confirm (step 4) asks the store
// whether n's entry outlived its last predecessor before n is reported
// held. (A foreign delete of n's entry after that is reported through the
// Lease's Done.)
func (e *Engine) wait(ctx context.Context, n *Node, q *Queue) (waitedOn int, err error) {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(n.alive, func() { cancel(context.Cause(n.alive)) })
	defer stop()
	var owed owedDelay
	for {
		if below, must := q.MustRead(); must {
			// The known entries are gone and older ones may be left: one
			// read tells (Queue's bound on what a waiter keeps).
			e.d.Survivors(wctx, n, q, below)
			if _, still := q.MustRead(); still {
				if err := ctxwait.Sleep(wctx, RetryDelay); err != nil {
					if n.alive.Err() != nil {
						return waitedOn, context.Cause(n.alive)
					}
					return waitedOn, err
				}
			}
			continue
		}
		gone, ok := q.Next()
		if !ok {
			break
		}
		waitedOn++
		owed.waitOn(gone)
		released, err := e.d.WaitGone(wctx, n, q, gone)
		if err != nil {
			if n.alive.Err() != nil {
				return waitedOn, context.Cause(n.alive)
			}
			return waitedOn, err
		}
		owed.went(gone, released, time.Now())
		q.Gone(gone.Key)
		if _, more := q.Next(); more {
			// The entry went while older ones were still in the snapshot:
			// it gave up waiting, or its session ended.
			e.d.Survivors(wctx, n, q, gone.Seq)
		}
	}
	if n.alive.Err() != nil {
		return waitedOn, context.Cause(n.alive)
	}
	if d := e.st.LockDelay(); d > 0 && owed.due {
		if err := e.serveDelay(wctx, n, owed, d); err != nil {
			if n.alive.Err() != nil {
				return waitedOn, context.Cause(n.alive)
			}
			return waitedOn, err
		}
	}
	return waitedOn, nil
}

// Lock-delay (etcdlock and zklock WithLockDelay): a waiter that becomes
// the head because the entry ahead of it went without its holder's
// release (its session ended on the store, or someone deleted it) waits
// the session's delay more before it holds, for work of the old holder's
// that no fence can stop and that may still run. A clean release hands
// over at once. The delay counts from when the waiter saw the entry go,
// which is no earlier than it went; the waiter keeps following its own
// entry meanwhile (a loss fails the acquisition, a cancel returns at
// once).
//
// Which going counts is the one of an entry that held when it went. In a
// queue of exclusive entries that is the last one the waiter waited on:
// one that went while an older entry was still there (the waiter waits on
// that one next) was only waiting. A writer behind several readers holding
// together owes the delay if any of them went without a release, unless
// an older writer turned up afterwards (then they were waiting for it).
// owedDelay keeps that account as the wait goes from entry to entry,
// newest to oldest.
type owedDelay struct {
	due   bool      // an entry that may have held went without a release
	since time.Time // when the waiter saw the last such entry go
	key   string    // that entry
	excl  bool      // it was exclusive
}

// waitOn is the start of a wait on w, an entry older than every entry
// gone so far, still there after they went: an exclusive w conflicts with
// each of them, so none of them held; any w, with an exclusive one.
func (o *owedDelay) waitOn(w Entry) {
	if o.due && (w.Kind == Exclusive || o.excl) {
		*o = owedDelay{}
	}
}

// went records how p went, seen at.
func (o *owedDelay) went(p Entry, released bool, at time.Time) {
	switch {
	case !released:
		*o = owedDelay{due: true, since: at, key: p.Key, excl: p.Kind == Exclusive}
	case p.Kind == Exclusive:
		// It held, so the entries that went before it (newer) did not.
		*o = owedDelay{}
	}
}

// serveDelay holds n back until delay d after the going o records, or
// until ctx ends (n's own end ends it too). n.lockDelay says how long it
// waited, n.delayUntil until when it was to (for giveUp).
func (e *Engine) serveDelay(ctx context.Context, n *Node, o owedDelay, d time.Duration) error {
	until := o.since.Add(d)
	start := time.Now()
	if !start.Before(until) {
		return nil // served already (a slow read on the way)
	}
	n.delayUntil = until
	e.st.log.Info(e.st.backend.Pkg+": lock-delay: the entry ahead went without a release", "lock", n.Name, "key", n.Key, "gone", o.key, "delay", d, "until", until)
	clear := e.markDelay(n, o, until)
	defer clear()
	err := ctxwait.Sleep(ctx, time.Until(until))
	n.lockDelay = time.Since(start)
	return err
}

// giveUp is abandon (step 7) for a waiter whose wait failed. One that gave
// up (its ctx ended) while it served a lock-delay, on a store whose
// waiters cannot tell giving up from a release (Driver.ReleaseMarked),
// returns at once but keeps its entry, held by nobody, until the delay's
// end: the waiter behind it, taking its going for a release, would
// otherwise hold before the delay is over. The entry is removed then,
// or goes with the session if it ends first; never left behind.
func (e *Engine) giveUp(n *Node, cause error) {
	until := n.delayUntil
	if until.IsZero() || e.d.ReleaseMarked() || n.alive.Err() != nil || !time.Now().Before(until) {
		e.abandon(n, cause)
		return
	}
	n.kill(cause)
	e.st.log.Debug(e.st.backend.Pkg+": lock-delay: giving up; the entry stays until the delay's end", "lock", n.Name, "key", n.Key, "until", until)
	e.st.Go(func(ctx context.Context) {
		if ctxwait.Sleep(ctx, time.Until(until)) == nil {
			e.d.Abandon(n)
		}
	})
}

// DelayMarker is a store's record of the lock-delays its waiters serve,
// for the distlock status command: a driver that has one implements it.
type DelayMarker interface {
	// MarkDelay records, in the background, that n serves a lock-delay
	// until until, after entry gone went without a release, in a record
	// of n's session (gone with it); it returns at once. clear removes
	// the record, in the background too, once the delay is over.
	MarkDelay(n *Node, gone string, until time.Time) (clear func())
}

// markDelay has the store record n's lock-delay (see DelayMarker), if it
// can; clear ends the record.
func (e *Engine) markDelay(n *Node, o owedDelay, until time.Time) (clear func()) {
	m, ok := e.d.(DelayMarker)
	if !ok {
		return func() {}
	}
	return m.MarkDelay(n, o.key, until)
}

// hooks are what a recipe adds to the life of its held entries (step 5);
// the zero value adds nothing. The semaphore's are in semaphore.go.
type hooks struct {
	// revokeAs is the lock name under which revocations of a held entry
	// are recorded, when it is not the entry's own Name.
	revokeAs string
	// released, if not nil, runs after the entry's release (Unlock),
	// whatever its outcome.
	released func(n *Node)
	// handedOff, if not nil and set, says the entry was deleted by an
	// election's handoff: the release (which the handoff calls to end the
	// Lease) has nothing left to delete.
	handedOff *atomic.Bool
	// ender, if not nil, receives the function that measures the hold's
	// end, for a handoff to call before its write starts the successor's.
	ender *func(cause error)
	// loser, if not nil, receives the Lease's lose function, for a
	// handoff to close Done before its write starts the successor's
	// term.
	loser *func(reason error)
}

// hold turns an acquired entry into a Lease that is lost when the entry is
// (step 5); lt measures and traces the hold, h adds the recipe's part.
func (e *Engine) hold(n *Node, lt *lockTel, h hooks) *distlock.Lease {
	t := distlock.Token{Name: n.Name, Seq: n.Token, Owner: e.st.owner}
	start := time.Now()
	// The hold's end is measured once: by Unlock before it deletes the
	// entry (so that the metrics are true once Unlock returns, and a
	// successor's hold, which the delete starts, is counted after this
	// one's end), or when the entry's life ends otherwise (a loss).
	var once sync.Once
	end := func(cause error) { once.Do(func() { lt.ended(n.Kind, start, n.Token, cause) }) }
	if h.ender != nil {
		*h.ender = end
	}
	release := func(ctx context.Context) error {
		ctx, span := lt.release(ctx, distlock.OpUnlock, n.Kind, n.Token)
		defer span.End()
		cause := error(distlock.ErrReleased)
		if n.alive.Err() != nil {
			cause = context.Cause(n.alive) // lost before the Unlock
		}
		end(cause)
		if h.handedOff != nil && h.handedOff.Load() {
			n.kill(distlock.ErrReleased)
			endSpan(span, nil)
			return nil
		}
		err := e.release(ctx, n)
		if h.released != nil {
			h.released(n)
		}
		endSpan(span, err)
		return err
	}
	l, lose := distlock.NewLease(e.st.backend.Name, t, release, e.st.Deadline, distlock.LeaseLockDelay(n.lockDelay))
	if h.loser != nil {
		*h.loser = lose
	}
	e.loseWith(n.alive, lose, end, n.Name, n.Token)
	lock := n.Name
	if h.revokeAs != "" {
		lock = h.revokeAs
	}
	e.followRevoke(n, lock, lose)
	return l
}

// followRevoke has a revocable session's held entry n, of lock, lose its
// Lease (lose) when an operator revokes it.
func (e *Engine) followRevoke(n *Node, lock string, lose func(error)) {
	if !e.st.Revocable() {
		return
	}
	e.d.FollowRevoke(n, lock, func(data []byte) {
		r, err := parseRevocation(data)
		if err != nil {
			// Still a request to let go; what it says is unknown.
			r = distlock.Revocation{Lock: n.Name, Reason: err.Error()}
		}
		e.st.log.Info(e.st.backend.Pkg+": lock revoked", "lock", n.Name, "token", n.Token, "by", r.By, "reason", r.Reason, "grace", r.Grace)
		lose(&distlock.RevokedError{Revocation: r})
	})
}

// loseWith ends a Lease (lose) when alive ends, unless alive ended with
// distlock.ErrReleased as its cause — what release cancels it with before
// deleting the entry. ended is told the cause of every end, release
// included (for metrics); a loss is logged for lock name at token first.
func (e *Engine) loseWith(alive context.Context, lose, ended func(error), name string, token int64) {
	lost := func(cause error) {
		e.st.log.Info(e.st.backend.Pkg+": lock lost", "lock", name, "token", token, "cause", cause)
	}
	context.AfterFunc(alive, func() {
		cause := context.Cause(alive)
		ended(cause)
		if errors.Is(cause, distlock.ErrReleased) {
			return
		}
		lost(cause)
		lose(Lost(cause))
	})
}

// release is the Lease's release function (step 6).
func (e *Engine) release(ctx context.Context, n *Node) error {
	known := n.alive.Err() != nil
	n.kill(distlock.ErrReleased)
	if err := e.d.Release(ctx, n, known); err != nil {
		return err
	}
	if known {
		// The entry's life ended before the Unlock: a loss, which the
		// Lease hears of through a callback that may not have run yet
		// (Unlock must report it all the same; it keeps one of the two).
		if cause := context.Cause(n.alive); !errors.Is(cause, distlock.ErrReleased) {
			return Lost(cause)
		}
	}
	e.st.log.Debug(e.st.backend.Pkg+": released", "lock", n.Name, "token", n.Token)
	return nil
}

// pastDeadline is the last check before an acquisition is returned
// (Lock, TryLock, RLock, Campaign, Acquire, a multi-lock's Lock): nil
// while the session lives and its client-side deadline (on the boot
// clock, see clock.go) lies ahead, else why not. A process stopped
// (SIGSTOP, a long GC, a starved VM) while its entry waited can wake past
// the deadline with the event that says it holds already read, before
// the session's own timer has ended it: the store may have expired the
// session meanwhile and granted the lock to a successor, so the entry's
// holding cannot be trusted, and the acquisition fails instead.
func (e *Engine) pastDeadline() error {
	d := e.st.Deadline() // ends the session if a suspend put it past d
	if err := e.st.Err(); err != nil {
		return err
	}
	if now := time.Now(); !now.Before(d) {
		return fmt.Errorf("%w: the session's client-side deadline %s had passed %v before the acquisition could return (the process was stopped or starved); the store may have expired the session meanwhile",
			distlock.ErrSessionExpired, d.Format(time.RFC3339Nano), now.Sub(d).Round(time.Millisecond))
	}
	return nil
}

// abandon is the failure path of an acquisition whose entry was made
// (step 7).
func (e *Engine) abandon(n *Node, cause error) {
	n.kill(cause)
	e.d.Abandon(n)
}
