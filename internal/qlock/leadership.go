package qlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/distlock/distlock"
)

// leadership is a won campaign: the held entry's Lease, and the entry for
// Proclaim, Resign and HandOff.
type leadership struct {
	*distlock.Lease
	e    *Engine
	n    *Node
	tel  *lockTel
	name string
	prio int
	// compat is the election's compatibility mode: one whose foreign rule
	// is "the oldest leads" refuses a HandOff.
	compat distlock.Compat
	// handedOff is set once a HandOff deleted the entry: the Lease's
	// release then has nothing left to delete.
	handedOff atomic.Bool
	// endHold measures the hold's end (see hooks.ender).
	endHold func(cause error)
	// lose closes the Lease's Done (see hooks.loser): a step-down does
	// before its write can start another term.
	lose func(reason error)
	// state is the election's latest state the leader's watch saw (keep).
	state atomic.Pointer[ElectionState]
	// unwatch ends the leader's watch (keep).
	unwatch func()
	// mu serializes Proclaim, Resign and HandOff: a driver may keep the
	// entry's version in n, which Proclaim updates.
	mu sync.Mutex
}

// String names the leader's entry.
func (l *leadership) String() string { return l.n.Key }

// keep follows the election's states on the won campaign's watch until
// it ends (with the entry's life), so that a HandOff can pick its
// successor without reading first. won is the state the campaign won in;
// unwatch ends the watch (and closes states), for a step-down once its
// pick is made.
func (l *leadership) keep(won ElectionState, states <-chan ElectionState, unwatch func()) {
	l.state.Store(&won)
	l.unwatch = unwatch
	go func() {
		for st := range states {
			if !st.Partial { // a partial state cannot settle a pick
				l.state.Store(&st)
			}
		}
	}()
}

func (l *leadership) fail(op distlock.Op, err error) error {
	return l.e.fail(l.n.Name, op, err)
}

// endCause says why the leader's entry's life ended.
func (l *leadership) endCause() error { return cmp.Or(l.Err(), context.Cause(l.n.alive)) }

// notLeader is the error of an operation on a leadership whose term has
// ended. err is what the operation found (the Lease's error, Unlock's, or
// the term record's state); the message says in an election's words how
// the term ended ("not the leader: this term ended (resigned)", "not the
// leader: this term was lost: ..."), from the Lease's Err unless err is
// the loss itself, and errors.Is and errors.As see both.
func (l *leadership) notLeader(op distlock.Op, err error) error {
	why := err
	if e := l.Err(); e != nil && !errors.Is(err, distlock.ErrLost) {
		why = e
	}
	return l.fail(op, fmt.Errorf("%w: %w", distlock.ErrNotLeader, &termOver{err: err, why: why}))
}

// termOver is how a leadership's term ended, as the cause of an election
// operation's error: its text is an election's words (termWords of why),
// and it wraps err, and why if that is another error.
type termOver struct{ err, why error }

func (e *termOver) Error() string { return termWords(e.why) }

func (e *termOver) Unwrap() []error {
	if e.why == e.err {
		return []error{e.err}
	}
	return []error{e.err, e.why}
}

// termWords says in an election's words how a term ended, given the
// Lease's error that ended it (or what an operation found).
func termWords(err error) string {
	var sd *steppedDown
	var rev *distlock.RevokedError
	switch {
	case errors.Is(err, distlock.ErrLost):
		return "this term was lost: " + strings.TrimPrefix(causeText(err), distlock.ErrLost.Error()+": ")
	case errors.As(err, &sd):
		return "this term ended (" + sd.ended() + ")"
	case errors.As(err, &rev):
		return fmt.Sprintf("this leader was asked to step down by %s: %q", rev.By, rev.Reason)
	case errors.Is(err, distlock.ErrReleased):
		return "this term ended (released)"
	}
	return "this term ended: " + causeText(err)
}

// causeText is the text of a Lease's error without the lock's operation
// ("unlock: ", "hold: "), which an election's own operation replaces: the
// cause of each *distlock.LockError in it, joined by "; ".
func causeText(err error) string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		parts := []string{}
		for _, e := range j.Unwrap() {
			parts = append(parts, causeText(e))
		}
		return strings.Join(parts, "; ")
	}
	var le *distlock.LockError
	if errors.As(err, &le) && le.Err != nil {
		return le.Err.Error()
	}
	return err.Error()
}

// entryDelete is the error of the leader's entry's delete (the Lease's
// Unlock) inside a step-down's: it reads "deleting the leader's entry:
// CAUSE" and wraps err.
type entryDelete struct{ err error }

func (e entryDelete) Error() string { return "deleting the leader's entry: " + causeText(e.err) }
func (e entryDelete) Unwrap() error { return e.err }

// Proclaim replaces the leader's value, only while this term's entry
// still exists; otherwise (and, without writing, once this Leadership has
// ended) it fails with an error wrapping distlock.ErrNotLeader. A Proclaim
// does not hand leadership over.
func (l *leadership) Proclaim(ctx context.Context, value string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.Err(); err != nil {
		return l.notLeader(distlock.OpProclaim, err)
	}
	if l.compat == distlock.CompatCuratorLatch {
		// The value is the node's data, and Curator's LeaderLatch acts on
		// its predecessor's deletion alone: a data change would spend the
		// one-shot watch of the latch behind this leader, which would
		// then miss the leader's going.
		return l.fail(distlock.OpProclaim, fmt.Errorf("a Proclaim in an election shared with Curator's LeaderLatch, which would stop waiting for this leader's end: %w", errors.ErrUnsupported))
	}
	if err := l.e.d.Proclaim(ctx, l.n, value); err != nil {
		return l.fail(distlock.OpProclaim, err)
	}
	return nil
}

// Resign ends leadership (see distlock.Leadership): its Done closes
// first, then it hands over to the next in line as HandOff does, or, when
// no candidate waits or every handoff it tries is refused, deletes the
// entry if it is still this term's (the Lease's Unlock), which leaves the
// term vacant for the next candidate to claim. If leadership had already
// been lost, or Resign was called before, the error wraps
// distlock.ErrNotLeader (and ErrLost or ErrReleased); if the delete could
// not be made, the error says so (the entry is retried in the background
// and goes with the session at the latest) — Resign never pretends.
func (l *leadership) Resign(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, span := l.tel.release(ctx, distlock.OpResign, l.n.Kind, l.n.Token)
	defer span.End()
	_, err := l.stepDown(ctx, distlock.OpResign, "", true)
	endSpan(span, err)
	return err
}

// HandOff ends this term and starts the successor's in one write (see
// distlock.Leadership).
func (l *leadership) HandOff(ctx context.Context, to string) (distlock.LeaderInfo, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, span := l.tel.release(ctx, distlock.OpHandOff, l.n.Kind, l.n.Token)
	defer span.End()
	if l.compat != "" {
		// The foreign client takes the oldest candidate for the leader:
		// a term handed to any other would lead beside it.
		err := l.fail(distlock.OpHandOff, fmt.Errorf("a handoff in an election shared with %s's, whose rule is that the oldest candidate leads (Resign leaves the term to it): %w", l.compat, errors.ErrUnsupported))
		endSpan(span, err)
		return distlock.LeaderInfo{}, err
	}
	li, err := l.stepDown(ctx, distlock.OpHandOff, to, false)
	endSpan(span, err)
	return li, err
}
