package qlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
)

// Campaign enqueues a candidate with value as its value and waits until
// it leads. It returns only once the term record names its entry, written
// while the entry existed (no phantom leader), and fails, leaving no
// entry behind, when ctx ends (the error wraps ctx's cause), when the
// session ends (distlock.ErrSessionExpired, ErrSessionClosed) or when its
// entry is deleted by someone else (distlock.ErrEntryGone). Once the
// session has ended every Campaign fails: campaign again on a new
// session.
//
// The returned Leadership ends (Done, Context) when the entry goes, the
// session ends, or Resign or HandOff is called; its Err then says why.
func (el *Election) Campaign(ctx context.Context, value string, opts ...distlock.CampaignOption) (distlock.Leadership, error) {
	c := distlock.NewCampaignConfig(opts...)
	if c.Priority > distlock.MaxPriority || c.Priority < -distlock.MaxPriority {
		return nil, el.e.fail(el.name, distlock.OpCampaign, fmt.Errorf("priority %d is out of range [-%d, %d]", c.Priority, distlock.MaxPriority, distlock.MaxPriority))
	}
	if el.compat != "" && c.Priority != 0 {
		// The foreign rule is "the oldest leads": a priority would make
		// this candidate lead beside the foreign client's oldest.
		return nil, el.e.fail(el.name, distlock.OpCampaign, fmt.Errorf("priority %d in an election shared with %s's, whose rule is that the oldest candidate leads: %w", c.Priority, el.compat, errors.ErrUnsupported))
	}
	r := Request{Op: distlock.OpCampaign, Kind: Candidate, Value: []byte(value), Priority: c.Priority, Compat: el.compat}
	l := &leadership{e: el.e, tel: el.tel, name: el.name, prio: c.Priority, compat: el.compat}
	// A leader whose entry was deleted by someone else may still be named
	// by the term record (etcd keeps it until the session ends): the
	// cleanup of a failed acquisition clears it (abandonLost).
	h := hooks{handedOff: &l.handedOff, ender: &l.endHold, loser: &l.lose, abandonLost: true}
	h.wait = func(ctx context.Context, es []Enqueued) (int, error) { return el.wait(ctx, r, es[0].Node, l) }
	n, lease, err := el.takeWith(ctx, r, h, func(ctx context.Context) (*Node, queueStats, error) {
		ns, qs, err := el.e.acquire(ctx, el.name, []string{el.name}, r, h)
		if err != nil {
			return nil, qs, err
		}
		return ns[0], qs, nil
	})
	if err != nil {
		return nil, err
	}
	l.Lease, l.n = lease, n
	return l, nil
}

// wait is a candidate's wait until it leads (hooks.wait), for r's entry n,
// made and followed by the engine: it follows the election's state, and
// leads once the term record names its entry; while the term is vacant
// and it is the next in line, it claims the term; while a candidate of a
// lower priority leads and it is the next in line, it asks that leader to
// step down (preempt). A win sets n's token (the term's) and hands the
// watch over to l (leadership.keep); it returns how many entries it
// waited on (1 if a leader led before it, else 0).
func (el *Election) wait(ctx context.Context, r Request, n *Node, l *leadership) (waitedOn int, _ error) {
	e, name := el.e, el.name
	// The watch outlives a won campaign: the leader keeps the election's
	// state from it for its HandOff (leadership.keep), until its entry's
	// life ends (which a failure after this wait, too, ends) or a
	// step-down has made its pick. ctx ends it only while campaigning.
	wctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopAlive := context.AfterFunc(n.alive, func() { cancel(context.Cause(n.alive)) })
	stopCtx := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	states := make(chan ElectionState)
	go e.d.WatchElection(wctx, name, states)
	won := false
	defer func() {
		stopCtx()
		if won {
			return
		}
		stopAlive()
		cancel(nil)
		for range states { // let the watch end
		}
	}()
	var (
		pre      preemption
		st       ElectionState
		claiming bool // the last state's claim failed without an answer
	)
	defer pre.stop()
	for {
		if claiming {
			// A claim whose outcome is unknown: if it was made, the watch
			// says so; if not, try again on the same state.
			select {
			case s, ok := <-states:
				if !ok {
					return waitedOn, el.waitEnd(ctx, n)
				}
				if s.Partial && s.Leader != n.Key {
					continue
				}
				st = s
			case <-wctx.Done():
				return waitedOn, el.waitEnd(ctx, n)
			case <-time.After(RetryDelay):
			}
		} else {
			s, ok := <-states
			if !ok {
				return waitedOn, el.waitEnd(ctx, n)
			}
			if s.Partial && s.Leader != n.Key {
				// Only the record is known: whether to claim or preempt
				// depends on the candidates, which the full state brings.
				continue
			}
			st = s
		}
		claiming = false
		lead, led := st.leader()
		next, _ := st.next(st.Leader, "")
		switch {
		case led && lead.Key == n.Key:
			if st.Partial {
				// The record names this entry, and every write that names
				// a candidate (a claim, a handoff) made sure in the same
				// write that its entry existed: the term started while
				// this entry was alive. That it still is, this campaign
				// knows without the rest of the state: it is its own
				// entry, followed since its creation (a deletion by
				// anyone else, or the session's end, ends n.alive), and
				// ConfirmAll looks at what the follower may not have
				// handled yet. The other candidates, their values and
				// the listing bear on whom a leader hands over to, not
				// on whether this one leads: the watch reads them after,
				// for the leadership's keep. A confirmation that fails
				// decides nothing: the full state does. A full state
				// that names this entry proves it exists: no look more.
				if errs := e.d.ConfirmAll(wctx, []*Node{n}); len(errs) > 0 && errs[0] != nil {
					continue
				}
			}
			n.Token = st.Term
			n.Waited = true
			pre.finish()
			won = true
			l.keep(st, states, func() { cancel(nil) })
			return waitedOn, nil
		case led:
			waitedOn = 1
			if next.Key == n.Key && r.Priority > lead.Priority {
				pre.start(el, st.Term, lead, string(r.Value), r.Priority)
			}
		case next.Key == n.Key:
			term, err := e.d.ClaimTerm(wctx, n, st)
			switch {
			case err == nil:
				n.Token = term
				pre.finish()
				won = true
				l.keep(st, states, func() { cancel(nil) })
				return waitedOn, nil
			case errors.Is(err, ErrTermMoved):
				// The watch brings the state that moved it.
			case wctx.Err() != nil:
				return waitedOn, el.waitEnd(ctx, n)
			default:
				e.st.log.Debug(e.st.backend.Pkg+": claim failed; trying again", "election", name, "err", err)
				claiming = true
			}
		}
	}
}

// waitEnd says why a candidate's wait ended without a win: its entry's
// end, ctx's, or the watch's (the engine then abandons the entry).
func (el *Election) waitEnd(ctx context.Context, n *Node) error {
	switch {
	case n.alive.Err() != nil:
		return context.Cause(n.alive)
	case ctx.Err() != nil:
		return context.Cause(ctx)
	}
	return fmt.Errorf("%w: the election's watch ended (connection closed)", distlock.ErrSessionClosed)
}

// preemption is a waiting candidate's request that a leader of a lower
// priority step down: a revocation of the leader's term, forced after the
// election's preempt grace, running until the candidate's campaign ends.
type preemption struct {
	term   int64
	cancel context.CancelFunc
	done   chan struct{}
}

// start asks the leader lead of term to step down, once per term.
func (p *preemption) start(el *Election, term int64, lead Contender, value string, prio int) {
	if p.term == term {
		return
	}
	p.stop()
	ctx, cancel := context.WithCancel(el.e.st.Context())
	p.term, p.cancel, p.done = term, cancel, make(chan struct{})
	grace := el.cfg.PreemptGrace
	req := distlock.RevokeRequest{
		Reason: fmt.Sprintf("preempted by candidate %q of priority %d (the leader's is %d)", value, prio, lead.Priority),
		By:     cmp.Or(el.e.st.holder, revokedBy()),
		Grace:  max(grace, 0),
		Force:  grace >= 0,
	}
	st := ElectionState{Term: term, Leader: lead.Key}
	held := st.leaderEntry(el.name, lead)
	el.e.st.log.Info(el.e.st.backend.Pkg+": preempting the leader", "election", el.name, "leader", lead.Value, "token", term, "grace", grace)
	go func() {
		defer close(p.done)
		if _, err := revokeHolders(ctx, el.e.d.ClientStore(), el.name, []distlock.QueueEntry{held}, req); err != nil && ctx.Err() == nil {
			el.e.st.log.Info(el.e.st.backend.Pkg+": preemption failed", "election", el.name, "token", term, "err", err)
		}
	}()
}

// finish lets a preemption whose leader has gone (this candidate won)
// record its outcome, for a bounded time, then stops it.
func (p *preemption) finish() {
	if p.cancel != nil {
		t := time.NewTimer(AbandonTimeout)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
		}
	}
	p.stop()
}

// stop ends a running preemption: this candidate gave up, or the leader
// it asked changed (and a forced delete would hit the wrong term).
func (p *preemption) stop() {
	if p.cancel != nil {
		p.cancel()
		<-p.done
		p.cancel = nil
	}
}
