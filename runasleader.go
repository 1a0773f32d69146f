package distlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// RunAsLeader's backoff: the pause before campaigning again grows from
// minBackoff, doubling after every failed Campaign and every term that
// ended with fn's error or the loss of leadership, up to maxBackoff; each
// pause is drawn at random between half and all of it, so that workers
// that failed together do not come back together.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 10 * time.Second
)

// RunAsLeader is the singleton-worker loop: it campaigns in e with value,
// runs fn while this candidate leads, and starts over, until ctx ends
// (then it returns ctx's cause) or fn fails on its own (then it returns
// fn's error). At most one of the workers running RunAsLeader on one
// election leads at a time.
//
// fn's context is cancelled the moment leadership is lost (entry deleted,
// session expired or not confirmed alive in time; context.Cause says why)
// and when ctx ends. When fn returns, for any reason, RunAsLeader first
// resigns, which hands leadership to the next candidate in the same write
// (see Leadership.Resign). Then:
//
//   - ctx has ended: RunAsLeader returns context.Cause(ctx), whatever fn
//     returned.
//   - fn returned an error while this candidate still led (fn's context
//     not cancelled) and the Resign found the term still its own and
//     ended it cleanly: RunAsLeader returns fn's error as it is. A worker
//     whose fn fails stops, as with errgroup; to keep a worker going
//     through fn's failures, have fn handle them (or call RunAsLeader in
//     a loop).
//   - fn returned nil: RunAsLeader campaigns again right away.
//   - leadership was lost or revoked during the term (fn's context was
//     cancelled by it, or the Resign found the term over, as when a fence
//     refused a deposed leader before it heard of its loss): fn's error
//     is taken for the loss's consequence, and RunAsLeader campaigns again
//     after a backoff.
//
// A failed Campaign is retried after a backoff too. The backoff starts at
// 100 ms, doubles after each such failure up to 10 s, is jittered (each
// pause is uniform between half and all of the current value), and starts
// over after a term that lasted longer than 10 s.
//
// Waiting candidates are queued in their Campaign, not in a backoff: when
// the leader dies, the next one takes over as soon as the backend sees the
// leader's entry go, whatever the backoff.
//
// # Stopping and being preempted
//
// Cancelling ctx is a graceful stop: fn's context is cancelled, and once
// fn has returned RunAsLeader hands leadership over to the next candidate
// before it returns, so a rolling deploy never leaves the election without
// a leader for a lease's length. opts are Campaign's (WithPriority): when
// a candidate of a higher priority asks this leader to step down, fn's
// context is cancelled with a *RevokedError as its cause, and the
// handover on fn's return goes to that candidate (the next in line is the
// highest priority). A leader hears such a request at once only on a
// revocable session; otherwise it is deleted after the election's preempt
// grace (see WithPreemptGrace).
//
// # When fn ignores its context
//
// Cancelling a context stops nothing by itself: a fn that keeps going (or
// that is paused — GC, swap, a stopped VM — and resumes unaware) still
// writes after a new leader has taken over. That is what fencing tokens
// are for: fn receives this term's token and must send every write to the
// protected resource through a fence (package fencing: fencing.Memory, a
// SQL table, etcd, ZooKeeper, an HTTP service) with it. Tokens of later
// terms are larger, so once the new leader has written, the fence refuses
// every write of the deposed one (fencing.ErrStale); before that, the old
// leader's writes are still admitted, in token order. fn should stop at
// the first refusal.
//
// A backend's Elector may be bound to a session that can end for good (an
// recipe.Election's session, once expired, fails every Campaign);
// RunAsLeader then keeps retrying with the longest backoff until ctx ends,
// so watch the session and cancel ctx, or run RunAsLeader again on a new
// session.
func RunAsLeader(ctx context.Context, e Elector, value string, fn func(ctx context.Context, t Token) error, opts ...CampaignOption) error {
	failures := 0
	pause := func() error {
		d := min(maxBackoff, minBackoff<<min(failures, 16))
		failures++
		d = d/2 + rand.N(d/2+1)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
			return nil
		}
	}
	for {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		l, err := e.Campaign(ctx, value, opts...)
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if err := pause(); err != nil {
				return err
			}
			continue
		}
		began := time.Now()
		leading, ferr := runTerm(ctx, l, fn)

		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
		// A failed resign is not retried here: the entry goes with the
		// session at the latest, and the backend keeps trying to delete
		// it. It does say the term may not have been this candidate's to
		// the end, so fn's error is not taken for fn's own.
		rerr := l.Resign(rctx)
		cancel()
		lost := !leading || rerr != nil || errors.Is(l.Err(), ErrLost)

		switch {
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case ferr != nil && !lost:
			// fn failed on its own while this candidate led, and the
			// term ended cleanly: the caller's error to handle.
			return ferr
		}
		if time.Since(began) > maxBackoff {
			failures = 0
		}
		if ferr == nil && !lost {
			failures = 0
			continue
		}
		if err := pause(); err != nil {
			return err
		}
	}
}

// runTerm runs fn for one term of leadership l, with a context cancelled
// when ctx ends or l does. leading reports whether that context was still
// live when fn returned: fn's error, if any, is then fn's own, not the
// consequence of a lost (or revoked) term or of ctx's end.
func runTerm(ctx context.Context, l Leadership, fn func(ctx context.Context, t Token) error) (leading bool, err error) {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(l.Context(), func() { cancel(l.Err()) })
	defer stop()
	err = fn(runCtx, l.Token())
	return runCtx.Err() == nil && l.Err() == nil, err
}
