package qlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
)

// watchReader is a driver whose election watch reads the store after each
// event (ZooKeeper's events carry no data). A driver whose events carry
// the state (etcd) keeps a leader's watch until the entry's end: there,
// ending it early would itself be a request (a watch cancel) on the
// write's way.
type watchReader interface{ WatchReads() bool }

// handoffTries bounds how often a handoff picks a successor again after
// its write was refused (the one it picked left before the write).
const handoffTries = 8

// steppedDown is the cause a leadership's Done closes with when its leader
// ends the term (Resign, HandOff, op): it matches distlock.ErrReleased.
type steppedDown struct {
	op  distlock.Op
	how string
}

func (e *steppedDown) Error() string { return e.how }
func (e *steppedDown) Unwrap() error { return distlock.ErrReleased }

// ended says how the term ended, for termWords.
func (e *steppedDown) ended() string {
	if e.op == distlock.OpHandOff {
		return "handed off"
	}
	return "resigned"
}

// stepDown is Resign (resign set) and HandOff(to). The rule it keeps: the
// leader stops believing before anybody else can lead. Everything that
// can keep it leading (no candidate to hand over to, a term record that
// no longer names it) is decided before any write, from the state the
// leader's watch last saw or a fresh read; then Done closes (its Err
// saying so), and only then does the write that may start the
// successor's term go out. A write refused or unanswered after that never
// makes this Leadership lead again: the handoff is tried with a new pick
// (HandOff to a value that left falls back to the next in line), and
// failing that the entry is deleted, which leaves the term vacant for the
// next candidate to claim.
func (l *leadership) stepDown(ctx context.Context, op distlock.Op, to string, resign bool) (distlock.LeaderInfo, error) {
	n := l.n
	// A leader asked to step down (revoked, preempted) still leads until
	// it hands over: its entry is alive though its Lease's Err is set.
	if n.alive.Err() != nil {
		if !resign {
			return distlock.LeaderInfo{}, l.notLeader(op, l.endCause())
		}
		// Lost (or resigned) before: Unlock removes what is left and
		// reports it.
		err := l.Unlock(ctx)
		if errors.Is(err, distlock.ErrLost) || errors.Is(err, distlock.ErrReleased) {
			err = l.notLeader(op, err)
		}
		return distlock.LeaderInfo{}, err
	}
	st, next, found, err := l.pick(ctx, op, to)
	switch {
	case err != nil && resign:
		// Resign steps down all the same: without a pick, by deleting the
		// entry (a no-op if it is gone already).
		l.endHold(distlock.ErrReleased)
		if errors.Is(err, distlock.ErrNotLeader) {
			_ = l.vacate(ctx, op, "resigned: the term had ended", nil)
			return distlock.LeaderInfo{}, err
		}
		return distlock.LeaderInfo{}, l.vacate(ctx, op, "resigned: the election could not be read to pick a successor; the term is left vacant", nil)
	case err != nil:
		return distlock.LeaderInfo{}, err
	}
	if !found && !resign {
		what := "no other candidate waits"
		if to != "" {
			what = fmt.Sprintf("no waiting candidate has the value %q", to)
		}
		if f, ok := st.foreignAhead(n.Key, to); ok {
			what = fmt.Sprintf("every candidate that could take over is younger than %s's candidate %s, which leads by its client's rule once this term ends", f.Client, f.Key)
		}
		return distlock.LeaderInfo{}, l.fail(op, fmt.Errorf("%w: %s", distlock.ErrNoCandidate, what))
	}
	// From here this term is over, whatever the write does. Measured as
	// ended before the write that starts the successor's hold.
	l.endHold(distlock.ErrReleased)
	if !found {
		return distlock.LeaderInfo{}, l.vacate(ctx, op, "resigned: no other candidate waits, the term is left vacant", nil)
	}
	// The write deletes this entry: its follower must not take that for a
	// loss. Held back, the loss is reported if the write did not happen.
	n.holdLoss()
	l.lose(l.fail(op, &steppedDown{op, fmt.Sprintf("handing leadership over to candidate %q", next.Value)}))
	// The pick is made, and any other this step-down makes reads first:
	// the watch has done its part. On a store whose watch reads after
	// every event, ended now, it does not answer the write's own events
	// with reads of its own while the successor reads (a handoff's gap is
	// the write and the successor's read alone).
	if w, ok := l.e.d.(watchReader); ok && w.WatchReads() {
		l.unwatch()
	}
	var instead error // set once HandOff(to)'s candidate left and the next in line was picked
	for try := 1; ; try++ {
		term, resent, err := l.handOffWrite(ctx, st, next)
		li := distlock.LeaderInfo{Value: next.Value, Token: distlock.Token{Name: l.name, Seq: term, Owner: next.Owner}, Priority: next.Priority}
		unknown, read := err != nil && !errors.Is(err, ErrTermMoved), false
		if resent && errors.Is(err, ErrTermMoved) {
			// A copy sent before the refused one may have been applied:
			// read which. This entry gone and the successor leading a
			// newer term says it was; this entry still there says it
			// was not (and can no longer be).
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), AbandonTimeout)
			now, rerr := l.e.d.ReadElection(rctx, l.name)
			cancel()
			mine := slices.ContainsFunc(now.Contenders, func(c Contender) bool { return c.Key == n.Key })
			switch lead, ok := now.leader(); {
			case rerr != nil:
				unknown, err = true, fmt.Errorf("%w (and the election could not be read: %w)", err, rerr)
			case mine:
				st, read = now, true
			case ok && lead.Key == next.Key && now.Term > n.Token:
				li, err = now.info(l.name), nil
			default:
				unknown, err = true, fmt.Errorf("%w, and this entry is gone with %+v leading", err, now.info(l.name))
			}
		}
		if err == nil {
			l.handedOff.Store(true)
			n.dropLoss(distlock.ErrReleased)
			_ = l.Unlock(ctx) // ends the Lease as released: nothing to delete
			l.e.st.log.Debug(l.e.st.backend.Pkg+": handed off", "election", l.name, "token", n.Token, "to", li.Value, "term", li.Token.Seq)
			if instead != nil {
				return li, l.fail(op, fmt.Errorf("%w; handed over to the next in line, %q, instead", instead, li.Value))
			}
			return li, nil
		}
		if unknown {
			// Whether the write happened is not known: the delete below
			// is a no-op if it did, and ends the term if it did not (a
			// copy of the write still on its way then fails its compare).
			// An entry found gone meanwhile (its follower's report, held
			// back so far, or the delete's) is reported as a loss: it may
			// have been this write's doing, or a forced end's before it,
			// and the safe side of the doubt is the loss.
			n.resumeLoss()
			return distlock.LeaderInfo{}, l.vacate(ctx, op, "", fmt.Errorf("the handoff to %q may or may not have been made: %w", next.Value, err))
		}
		// Refused: the handoff did not happen, and no copy of its write
		// can happen any more.
		switch {
		case try >= handoffTries:
			n.resumeLoss()
			return distlock.LeaderInfo{}, l.vacate(ctx, op, "", fmt.Errorf("the handoff was refused %d times, the last to %q: %w", try, next.Value, err))
		case ctx.Err() != nil:
			n.resumeLoss()
			return distlock.LeaderInfo{}, l.vacate(ctx, op, "", fmt.Errorf("the handoff to %q was refused (%w), and the call's context ended before another pick: %w", next.Value, err, context.Cause(ctx)))
		}
		if !read {
			if st, err = l.e.d.ReadElection(ctx, l.name); err != nil {
				n.resumeLoss()
				return distlock.LeaderInfo{}, l.vacate(ctx, op, "", fmt.Errorf("the handoff to %q was refused, and the election could not be read again: %w", next.Value, err))
			}
		}
		if lead, ok := st.leader(); !ok || lead.Key != n.Key || st.Term != n.Token {
			// Deposed meanwhile (forced out): the term ended without this
			// leader's write.
			n.resumeLoss()
			_ = l.Unlock(ctx)
			return distlock.LeaderInfo{}, l.notLeader(op, fmt.Errorf("%w: the term record no longer names a live entry %s", distlock.ErrLost, n.Key))
		}
		var found bool
		if next, found = st.next(n.Key, to); !found && to != "" {
			instead = fmt.Errorf("%w: no waiting candidate has the value %q any more (it left before the handoff's write)", distlock.ErrNoCandidate, to)
			next, found = st.next(n.Key, "")
		}
		if !found {
			n.resumeLoss()
			return distlock.LeaderInfo{}, l.vacate(ctx, op, "", cmp.Or(instead, fmt.Errorf("%w: no other candidate waits any more", distlock.ErrNoCandidate)))
		}
	}
}

// resolveTimeout bounds how long a step-down whose write got no answer
// keeps sending it again to learn its outcome, beyond the call's
// context if need be: a term whose outcome is not learnt is ended by a
// delete, and a ZooKeeper client that lost its connection redials only
// a second later.
const resolveTimeout = 2 * AbandonTimeout

// handOffWrite sends a step-down's write (Elections.HandOff) and, while
// no answer comes, sends the same write again, for up to resolveTimeout
// beyond the first failure. Its compares (the record's version, both
// entries' identities) make at most one copy apply, and once one is
// refused no other can apply later: a record's version only grows and a
// deleted entry never comes back. So the first answer settles it: a
// success is this handoff's; a refusal (ErrTermMoved) after resent means
// an earlier copy may have been applied (a read tells), without resent
// that the handoff did not happen. Any other error: no answer came.
func (l *leadership) handOffWrite(ctx context.Context, st ElectionState, next Contender) (term int64, resent bool, err error) {
	d, n := l.e.d, l.n
	if term, err = d.HandOff(ctx, n, st, next); err == nil || errors.Is(err, ErrTermMoved) {
		return term, false, err
	}
	// A driver's store error may keep a Txn of etcd's going on the server
	// after the client gave up, ordered after nothing this client sends
	// next: a read would not prove it did not happen, another copy does.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveTimeout)
	defer cancel()
	for l.e.st.Err() == nil && ctxwait.Sleep(rctx, RetryDelay) == nil {
		t, e := d.HandOff(rctx, n, st, next)
		if e == nil || errors.Is(e, ErrTermMoved) {
			return t, true, e
		}
		if rctx.Err() == nil {
			err = e
		}
	}
	return 0, true, err
}

// pick decides, before any write, whom stepDown hands over to: from the
// state the leader's watch last saw, which costs the handoff no read (its
// write compares everything it relies on), or, when that state cannot
// settle it (a candidate it may not have seen yet, a record it may not
// have seen move, a state of the record alone: the one a successor won
// in, until its watch's full state came), from a fresh read. found is false when no candidate
// (with value to, if set) waits. The error wraps distlock.ErrNotLeader
// when the term record no longer names this leader's live entry.
func (l *leadership) pick(ctx context.Context, op distlock.Op, to string) (st ElectionState, next Contender, found bool, err error) {
	n := l.n
	cached := l.state.Load()
	for try := 0; ; try++ {
		fresh := cached == nil || try > 0
		if fresh {
			if st, err = l.e.d.ReadElection(ctx, l.name); err != nil {
				return st, next, false, l.fail(op, err)
			}
		} else {
			st = *cached
		}
		next, found = st.next(n.Key, to)
		lead, ok := st.leader()
		leads := ok && lead.Key == n.Key && st.Term == n.Token
		if !fresh && (!found || !leads || st.Partial) {
			continue
		}
		if !leads {
			// The record moved on, or names an entry deleted by someone
			// else (forced): this term is over, whatever the entry's
			// watch has told the Lease so far.
			return st, next, false, l.notLeader(op, fmt.Errorf("%w: the term record no longer names a live entry %s", distlock.ErrLost, n.Key))
		}
		return st, next, found, nil
	}
}

// vacate ends the term by deleting the leader's entry (the Lease's Unlock,
// which deletes it only if it is still this term's), leaving the term
// vacant for the next candidate to claim: a Resign with nobody to hand
// over to, and every handoff that could not be made once Done had closed.
// how is Done's cause if Done is still open ("" says why). why, if not
// nil, is why no handoff was made: a HandOff reports it; a Resign, whose
// aim the delete reaches, reports only a delete that failed.
func (l *leadership) vacate(ctx context.Context, op distlock.Op, how string, why error) error {
	if how == "" {
		how = fmt.Sprintf("stepped down: %v; the entry is deleted, the term left vacant", why)
	}
	l.lose(l.fail(op, &steppedDown{op, how}))
	err := l.Unlock(ctx)
	switch {
	case err != nil && why != nil:
		return l.fail(op, fmt.Errorf("%w; stepping down by deleting the entry instead failed too: %w", why, entryDelete{err}))
	case errors.Is(err, distlock.ErrLost):
		// The delete found the term lost before it.
		return l.notLeader(op, err)
	case err != nil:
		return l.fail(op, entryDelete{err})
	case why != nil && op != distlock.OpResign:
		return l.fail(op, fmt.Errorf("%w; stepped down by deleting the entry instead (the term is vacant until the next candidate claims it)", why))
	}
	if why != nil {
		l.e.st.log.Info(l.e.st.backend.Pkg+": resigned by deleting the entry", "election", l.name, "token", l.n.Token, "why", why)
	}
	return nil
}
