package qlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
)

// The life cycle of one acquisition, start to end. This file is the one
// place that says what happens to an acquisition's entries; the store
// drivers (etcdq, zkq) only carry out the store's part of each step, and
// the recipes only add hooks (see hooks).
//
// An acquisition is a set of one or more entries (entrySet), one per
// name, made by one write: a Mutex, an RWMutex, a semaphore's line and a
// candidate have one, a multi-lock one per name (multi.go). Every step
// below is the same for all: it acts on every entry of the set, in one
// request where the store allows it, and an entry's end is the set's.
//
//  1. acquire checks the session and the context, then the driver's
//     EnqueueAll creates the entries and returns the queues it saw: one
//     Txn on etcd (puts guarded by the session's guard key, and range
//     reads); a create (a multi for several), then a listing and each
//     entry's own Stat on ZooKeeper. A recipe may first try to hold
//     without enqueueing (hooks.direct: a semaphore's direct claim).
//  2. The engine starts following each entry (Follow): if anyone but its
//     owner deletes it, or the session ends, the acquisition fails while
//     waiting and is lost while held.
//  3. A waiter's view of a queue is the snapshot the enqueue took, of
//     the entries older than its own that it conflicts with, the newest
//     few only (Queue). It can only shrink: nothing ever joins ahead; when
//     the few it knows are gone and older ones may be left, one read says
//     which. The waiter waits on one entry at a time, the nearest one it
//     conflicts with (Rule.Waits), and watches that entry alone (WaitGone);
//     with several entries, the newest such entry of all their queues.
//     When it goes, the driver may already know that nothing older is
//     left (on ZooKeeper a holder's release marks itself with a data
//     change); otherwise, if older entries may be left, one read
//     refreshes the view (SurvivorsAll), and the same read refreshes the
//     set's other views. A handoff's cost therefore does not grow with the
//     queue, nor with the names: one write (the release), one event (the
//     waiter's watch) and at most one read of the survivors. With a
//     lock-delay, a waiter whose last predecessor went without its
//     holder's release then waits the delay (see owedDelay).
//     A candidate (an election's, one entry) waits otherwise, through its
//     recipe's hooks.wait: not on the entries ahead of it but on the
//     election's state (WatchElection), until the term record names its
//     entry, claiming a vacant term (ClaimTerm) when it is the next in
//     line and asking a leader of lower priority to step down. Its token
//     is the term's, not its entry's position; its win is its own last
//     look, in place of step 4: a full state that names the entry proves
//     that it exists (ConfirmAll, a read on etcd for an entry that
//     waited, would put a round trip on every handoff), and a record seen
//     alone is confirmed by ConfirmAll before the entry is marked as one
//     that waited. No lock-delay, no Try. Its watch outlives the win, as
//     the leadership's state (leadership.keep), until the entry's life
//     ends; a failed wait is abandoned (step 7).
//  4. ConfirmAll is the last look before "acquired": whatever the store's
//     watches may not have delivered yet (on etcd, for entries that
//     waited, one read that they outlived their last predecessors). A
//     recipe whose entry waits in a line for something else (a
//     semaphore's slots) first claims it there (hooks.claim), waiting
//     while it cannot; the claim's entry is then the one that holds.
//  5. hold turns the entries into one distlock.Lease, with a token per
//     entry, whose Done closes when any entry is lost (step 2's signal)
//     or when they are released; the recipe adds its own part through
//     hooks (a semaphore's permit: semaphore.go).
//  6. release (Lease.Unlock) deletes the entries that are still this
//     acquisition's, in one write (ReleaseAll), and reports a loss that
//     came first.
//  7. On every failure after step 1, abandon deletes the entries before
//     the call returns (within a bound; then in the background), so that
//     a failed Lock never leaves an entry that blocks a queue. Step 1 is
//     the driver's own: an enqueue whose outcome is unknown is cleaned up
//     inside EnqueueAll, by the store's means (etcd: the guard key;
//     ZooKeeper: the entries' GUID). A waiter that gives up while it
//     serves a lock-delay, on etcd, deletes its entry at the delay's end
//     (giveUp).

// acquire enqueues r in the queue of each of names, in one write, and
// waits until its entries hold (steps 1 to 4); label is the lock as errors
// name it. h's claim, if set, turns the entry into the one that holds once
// it leads its queue (a semaphore's line and slots); h's wait, if set,
// replaces the queue's wait and the last look (a candidate's). On failure
// nothing is left behind. qs says what it saw of the queues, on failure
// too.
func (e *Engine) acquire(ctx context.Context, label string, names []string, r Request, h hooks) (_ []*Node, qs queueStats, _ error) {
	ctx, done, fail, err := e.start(ctx, label, r.Op)
	defer done()
	if err != nil {
		return nil, qs, err
	}
	if h.direct != nil {
		// The recipe's own way to hold at once, before any entry is made
		// (a semaphore's direct claim); a Try request ends there.
		n, err := h.direct(ctx)
		switch {
		case err == nil:
			qs.enqueued = true // nothing ahead
			ns, err := e.confirm(ctx, &entrySet{label: label, ns: []*Node{n}}, h, fail)
			return ns, qs, err
		case r.Try || !errors.Is(err, distlock.ErrLocked):
			return nil, qs, fail(err)
		}
	}

	es, err := e.d.EnqueueAll(ctx, names, r)
	if err != nil {
		return nil, qs, fail(err)
	}
	s := &entrySet{label: label, ns: make([]*Node, len(es)), qs: make([]*Queue, len(es))}
	qs.enqueued = true
	for i, x := range es {
		n := x.Node
		n.Name = names[i]
		e.follow(n)
		s.ns[i] = n
		if h.wait == nil {
			s.qs[i] = NewQueue(n.Entry, x.Ahead, x.More)
			qs.ahead += len(s.qs[i].ahead)
			qs.partial = qs.partial || x.More
		}
	}
	if h.wait != nil {
		// The recipe's own wait, which is also its last look (a
		// candidate's, steps 3 and 4).
		if qs.waitedOn, err = h.wait(ctx, es); err != nil {
			e.abandonAll(s.ns, err, hooks{})
			return nil, qs, fail(err)
		}
		e.st.log.Debug(e.st.backend.Pkg+": acquired", "lock", s.label, "key", s.ns[0].Key, "token", s.ns[0].Token)
		return s.ns, qs, nil
	}
	waits := false
	for i, n := range s.ns {
		w, ahead := s.qs[i].Next()
		// A view that must read first waits too: a partial read (one that
		// an enqueue retry made, with entries newer than this one among
		// the newest) may know nothing ahead of this entry although older
		// ones exist.
		_, must := s.qs[i].MustRead()
		n.Waited = ahead || must
		waits = waits || n.Waited
		if r.Try && n.Waited {
			// A store that cannot compare and create at once (ZooKeeper)
			// finds out only now that an entry made meanwhile is ahead.
			what := "entries ahead"
			if ahead {
				what = "entry " + w.Key
			}
			if len(s.ns) > 1 {
				what = fmt.Sprintf("lock %q: %s", n.Name, what)
			}
			err := fmt.Errorf("%w (%s)", distlock.ErrLocked, what)
			e.abandonAll(s.ns, err, hooks{})
			return nil, qs, fail(err)
		}
	}
	if waits {
		for i, n := range s.ns {
			e.st.log.Debug(e.st.backend.Pkg+": enqueued", "lock", n.Name, "key", n.Key, "ahead", len(s.qs[i].ahead))
		}
		qs.waitedOn, err = e.wait(ctx, s)
		for _, n := range s.ns {
			qs.delayed = max(qs.delayed, n.lockDelay)
		}
		if err != nil {
			for _, n := range s.ns {
				e.giveUp(n, err)
			}
			return nil, qs, fail(err)
		}
	}
	if h.claim != nil {
		return e.claim(ctx, s, h, &qs, fail)
	}
	ns, err := e.confirm(ctx, s, h, fail)
	return ns, qs, err
}

// confirm makes the last look at s's entries, all at once (step 4), and
// returns them; on failure it removes them (and has h free each).
func (e *Engine) confirm(ctx context.Context, s *entrySet, h hooks, fail func(error) error) ([]*Node, error) {
	for _, n := range s.ns {
		if n.alive == nil {
			e.follow(n) // made by the recipe's own write (a claim)
		}
	}
	if err := s.or(joined(e.d.ConfirmAll(ctx, s.ns))); err != nil {
		e.abandonAll(s.ns, err, h)
		return nil, fail(err)
	}
	e.st.log.Debug(e.st.backend.Pkg+": acquired", "lock", s.label, "key", s.ns[0].Key, "token", s.ns[0].Token)
	return s.ns, nil
}

// claim is the last step of a recipe whose entries wait in a line for
// something else (a semaphore's slots): s's entry, now the head of its
// line, claims (h.claim) what holds, waiting (h.waitClaim) while it cannot;
// the claim's write deletes the line entry. qs counts each wait.
func (e *Engine) claim(ctx context.Context, s *entrySet, h hooks, qs *queueStats, fail func(error) error) ([]*Node, queueStats, error) {
	line := s.ns[0]
	lctx, lcancel := context.WithCancelCause(ctx)
	defer lcancel(nil)
	defer context.AfterFunc(line.alive, func() { lcancel(context.Cause(line.alive)) })()
	failed := func(err error) ([]*Node, queueStats, error) {
		err = s.or(err)
		e.abandon(line, err)
		return nil, *qs, fail(err)
	}
	for {
		// Not lctx: the claim's own write deletes the line entry, which
		// ends line.alive while the claim may still read what it took.
		n, err := h.claim(ctx, line)
		if err == nil {
			// The claim deleted the line entry: end its life as a
			// release, so that its follower reports nothing.
			line.kill(distlock.ErrReleased)
			ns, err := e.confirm(ctx, &entrySet{label: s.label, ns: []*Node{n}}, h, fail)
			return ns, *qs, err
		}
		if !errors.Is(err, distlock.ErrLocked) {
			return failed(err)
		}
		qs.waitedOn++
		if err := h.waitClaim(lctx); err != nil {
			return failed(err)
		}
	}
}

// wait blocks until s's views say its entries hold, waiting on one entry
// at a time (step 3), and returns how many it waited on. When one of s's
// entries ends (deleted, session over) the wait fails with that cause,
// which also wins over "acquired": the watch on an entry of s's own may
// run behind the one on the entry it waits for, which is why ConfirmAll
// (step 4) asks the store whether s's entries outlived their last
// predecessors before s is reported held. (A foreign delete after that is
// reported through the Lease's Done.)
//
// With several entries (a multi-lock), the one waited on is the newest
// entry ahead of any of them: the one likely to go last, since the
// entries older than it, in every queue, go before it as a rule. When it
// goes, one read (the driver's SurvivorsAll) refreshes every view that
// still waits, so that the names whose queues cleared meanwhile cost no
// wait of their own: one watch at a time, not one per name. Waits never
// form a cycle (multi.go), so any order is safe. With a lock-delay each
// entry waits on its own predecessors, one after the other, since how an
// entry went is only known to a wait on it (owedDelay, per entry).
func (e *Engine) wait(ctx context.Context, s *entrySet) (waitedOn int, err error) {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	for _, n := range s.ns {
		defer context.AfterFunc(n.alive, func() { cancel(s.lost()) })()
	}
	owed := make([]owedDelay, len(s.ns))
	batch := e.st.LockDelay() <= 0
	var (
		reads  []int
		belows []int64
	)
	for {
		reads, belows = reads[:0], belows[:0]
		for i, q := range s.qs {
			if below, must := q.MustRead(); must {
				reads, belows = append(reads, i), append(belows, below)
			}
		}
		if len(reads) > 0 {
			// The known entries are gone and older ones may be left: one
			// read tells (Queue's bound on what a waiter keeps).
			e.d.SurvivorsAll(wctx, s.ns, s.qs, reads, belows)
			for _, i := range reads {
				if _, still := s.qs[i].MustRead(); still {
					if err := ctxwait.Sleep(wctx, RetryDelay); err != nil {
						return waitedOn, s.or(err)
					}
					break
				}
			}
			continue
		}
		i, gone, ok := s.next()
		if !ok {
			break
		}
		waitedOn++
		owed[i].waitOn(gone)
		released, err := e.d.WaitGone(wctx, s.ns[i], s.qs[i], gone)
		if err != nil {
			return waitedOn, s.or(err)
		}
		owed[i].went(gone, released, time.Now())
		s.qs[i].Gone(gone.Key)
		reads, belows = reads[:0], belows[:0]
		if _, more := s.qs[i].Next(); more {
			// The entry went while older ones were still in the snapshot:
			// it gave up waiting, or its session ended.
			reads, belows = append(reads, i), append(belows, gone.Seq)
		}
		for j, q := range s.qs {
			if _, waits := q.Next(); batch && j != i && waits {
				reads, belows = append(reads, j), append(belows, s.ns[j].Seq)
			}
		}
		if len(reads) > 0 {
			e.d.SurvivorsAll(wctx, s.ns, s.qs, reads, belows)
		}
	}
	if err := s.lost(); err != nil {
		return waitedOn, err
	}
	if d := e.st.LockDelay(); d > 0 {
		for i, n := range s.ns {
			if !owed[i].due {
				continue
			}
			if err := e.serveDelay(wctx, n, owed[i], d); err != nil {
				return waitedOn, s.or(err)
			}
		}
	}
	return waitedOn, nil
}

// hold turns acquired entries ns, of lock label, into one Lease that is
// lost when any of them is (step 5), with one token per entry; lt
// measures and traces the hold, h adds the recipe's part.
func (e *Engine) hold(label string, ns []*Node, lt *lockTel, h hooks) *distlock.Lease {
	first := ns[0]
	ts := make([]distlock.Token, len(ns))
	var delayed time.Duration // the entries waited together: the longest
	for i, n := range ns {
		ts[i] = distlock.Token{Name: n.Name, Seq: n.Token, Owner: e.st.owner}
		delayed = max(delayed, n.lockDelay)
	}
	// alive ends with the first entry's end, naming its lock when there
	// are several.
	alive := first.alive
	if len(ns) > 1 {
		var kill context.CancelCauseFunc
		alive, kill = context.WithCancelCause(context.Background())
		endWithFirst(ns, kill)
	} else {
		label = first.Name
	}
	start := time.Now()
	// The hold's end is measured once: by Unlock before it deletes the
	// entries (so that the metrics are true once Unlock returns, and a
	// successor's hold, which the delete starts, is counted after this
	// one's end), or when the entries' life ends otherwise (a loss).
	var once sync.Once
	end := func(cause error) { once.Do(func() { lt.ended(first.Kind, start, first.Token, cause) }) }
	if h.ender != nil {
		*h.ender = end
	}
	release := func(ctx context.Context) error {
		ctx, span := lt.release(ctx, distlock.OpUnlock, first.Kind, first.Token)
		defer span.End()
		cause := error(distlock.ErrReleased)
		if alive.Err() != nil {
			cause = context.Cause(alive) // lost before the Unlock
		}
		end(cause)
		if h.handedOff != nil && h.handedOff.Load() {
			first.kill(distlock.ErrReleased)
			endSpan(span, nil)
			return nil
		}
		err := e.release(ctx, ns)
		if h.released != nil {
			for _, n := range ns {
				h.released(n)
			}
		}
		endSpan(span, err)
		return err
	}
	var (
		l    *distlock.Lease
		lose func(error)
	)
	if len(ns) == 1 {
		l, lose = distlock.NewLease(e.st.backend.Name, ts[0], release, e.st.Deadline, distlock.LeaseLockDelay(delayed))
	} else {
		l, lose = distlock.NewMultiLease(e.st.backend.Name, ts, release, e.st.Deadline, distlock.LeaseLockDelay(delayed))
	}
	if h.loser != nil {
		*h.loser = lose
	}
	e.loseWith(alive, lose, end, label, first.Token)
	if h.abandonLost {
		e.abandonLost(ns)
	}
	for _, n := range ns {
		lock := n.Name
		if h.revokeAs != "" {
			lock = h.revokeAs
		}
		e.followRevoke(n, lock, lose)
	}
	return l
}

// release is the Lease's release function (step 6): it deletes ns's
// entries, all in one write where the store allows it.
func (e *Engine) release(ctx context.Context, ns []*Node) error {
	known := make([]bool, len(ns))
	for i, n := range ns {
		known[i] = n.alive.Err() != nil
		n.kill(distlock.ErrReleased)
	}
	errs := e.d.ReleaseAll(ctx, ns, known)
	out := make([]error, len(ns))
	for i, n := range ns {
		err := error(nil)
		if i < len(errs) {
			err = errs[i]
		}
		if err == nil && known[i] {
			// The entry's life ended before the Unlock: a loss, which the
			// Lease hears of through a callback that may not have run yet
			// (Unlock must report it all the same; it keeps one of the two).
			if cause := context.Cause(n.alive); !errors.Is(cause, distlock.ErrReleased) {
				err = Lost(cause)
			}
		}
		if err != nil && len(ns) > 1 {
			err = entryLost(n.Name, err)
		}
		out[i] = err
	}
	err := joined(out)
	if err == nil {
		e.st.log.Debug(e.st.backend.Pkg+": released", "lock", ns[0].Name, "entries", len(ns), "token", ns[0].Token)
	}
	return err
}
