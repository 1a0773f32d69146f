package locktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// TryLock under faults of its own client (RunTryFaults). TryLock means
// "do not wait for a holder", not "give up on the network": a request
// whose answer is lost, or that never reached the store, is retried within
// the call's context, and the call recognises its own entry if the lost
// request was applied. What every case checks:
//
//   - a free lock is taken, whatever the cut: the Lease is valid, exactly
//     one entry per name is left (its own), another session's TryLock is
//     refused while it holds, and its Unlock leaves nothing;
//   - a held lock is refused with an error wrapping distlock.ErrLocked,
//     and only then, with nothing left behind;
//   - a context that ends while the store is out of reach ends the call
//     with the context's error, and once the client is back nothing is
//     left behind.
//
// The cut's point is swept where the faults allow: replies held from
// before the call (the request applied, its answer lost), or from a
// moment into it, in sixths of an unfaulted TryLock's measured duration
// (on ZooKeeper, whose TryLock looks before it creates, some rounds land
// between the look and the create's answer); every byte held from before
// the call, then the connection reset (the request never applied). The
// faults need a RelayBackend.

// RunTryFaults runs the TryLock fault cases, each on a new Backend, which
// must be a RelayBackend.
func RunTryFaults(t *testing.T, newBackend func(t *testing.T) Backend) {
	for _, k := range tryKinds {
		t.Run(k.kind, func(t *testing.T) {
			t.Run("ReplyLostFree", func(t *testing.T) { tryReplyLost(t, newBackend(t), k, false) })
			t.Run("ReplyLostHeld", func(t *testing.T) { tryReplyLost(t, newBackend(t), k, true) })
			t.Run("NotAppliedFree", func(t *testing.T) { tryNotApplied(t, newBackend(t), k) })
			t.Run("CtxEndsCut", func(t *testing.T) { tryCtxEnds(t, newBackend(t), k) })
		})
	}
}

// tryKind is one of the TryLocks the cases run: on n names, taken with
// try, and held against it by hold (on another session); conflict, if
// set, is the TryLock that a lock taken with try refuses (try itself if
// not).
type tryKind struct {
	kind     string
	n        int
	try      func(t *testing.T, s Session, names []string) func(ctx context.Context) (*distlock.Lease, error)
	hold     func(t *testing.T, s Session, names []string) *distlock.Lease
	conflict func(t *testing.T, s Session, names []string) func(ctx context.Context) (*distlock.Lease, error)
	// entries lists lock name's entries, if not as Backend.Entries does
	// (a semaphore's line entries and slots).
	entries func(t *testing.T, b Backend, name string) []string
}

// entriesOf lists name's entries as k counts them.
func (k tryKind) entriesOf(t *testing.T, b Backend, name string) []string {
	t.Helper()
	if k.entries != nil {
		return k.entries(t, b, name)
	}
	return b.Entries(t, name)
}

// wantEach fails the test unless each of names has n entries.
func (k tryKind) wantEach(t *testing.T, b Backend, n int, why string, names ...string) {
	t.Helper()
	for _, name := range names {
		if e := k.entriesOf(t, b, name); len(e) != n {
			t.Fatalf("%s (lock %s): entries %q, want %d", why, name, e, n)
		}
	}
}

var tryKinds = []tryKind{
	{kind: "Mutex", n: 1,
		try: func(t *testing.T, s Session, names []string) func(context.Context) (*distlock.Lease, error) {
			return mutex(t, s, names[0]).TryLock
		},
		hold: func(t *testing.T, s Session, names []string) *distlock.Lease {
			return MustLock(t, mutex(t, s, names[0]))
		}},
	{kind: "MultiMutex", n: 2,
		try: func(t *testing.T, s Session, names []string) func(context.Context) (*distlock.Lease, error) {
			return tryMulti(t, s, names).TryLock
		},
		// Held on the second name only: the refusal names one lock.
		hold: func(t *testing.T, s Session, names []string) *distlock.Lease {
			return MustLock(t, mutex(t, s, names[1]))
		}},
	{kind: "RWMutexTryLock", n: 1,
		try: func(t *testing.T, s Session, names []string) func(context.Context) (*distlock.Lease, error) {
			return tryRW(t, s, names[0]).TryLock
		},
		hold: func(t *testing.T, s Session, names []string) *distlock.Lease {
			l, err := tryRW(t, s, names[0]).RLock(Ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			return l
		}},
	{kind: "RWMutexTryRLock", n: 1,
		try: func(t *testing.T, s Session, names []string) func(context.Context) (*distlock.Lease, error) {
			return tryRW(t, s, names[0]).TryRLock
		},
		hold: func(t *testing.T, s Session, names []string) *distlock.Lease {
			return MustLock(t, tryRW(t, s, names[0]))
		},
		conflict: func(t *testing.T, s Session, names []string) func(context.Context) (*distlock.Lease, error) {
			return tryRW(t, s, names[0]).TryLock
		}},
	// A semaphore of one permit: its TryAcquire is a claim of a slot.
	{kind: "SemaphoreTryAcquire", n: 1,
		try: func(t *testing.T, s Session, names []string) func(context.Context) (*distlock.Lease, error) {
			sem := semaphore(t, s, names[0], 1)
			return func(ctx context.Context) (*distlock.Lease, error) {
				p, err := sem.TryAcquire(ctx)
				if err != nil {
					return nil, err
				}
				return p.Lease, nil
			}
		},
		hold: func(t *testing.T, s Session, names []string) *distlock.Lease {
			p, err := semaphore(t, s, names[0], 1).Acquire(Ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			return p.Lease
		},
		entries: func(t *testing.T, b Backend, name string) []string {
			line, slots := b.SemaphoreEntries(t, name)
			return append(line, slots...)
		}},
}

func tryMulti(t *testing.T, s Session, names []string) distlock.Locker {
	t.Helper()
	m, err := s.MultiMutex(names...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func tryRW(t *testing.T, s Session, name string) RWLocker {
	t.Helper()
	m, err := s.RWMutex(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tryNames returns k's lock names for one round.
func (k tryKind) names(round string) []string {
	out := make([]string, k.n)
	for i := range out {
		out[i] = fmt.Sprintf("tryfault-%s-%s-%d", strings.ToLower(k.kind), round, i)
	}
	return out
}

// tryAsync runs try(ctx) in a goroutine.
func tryAsync(ctx context.Context, try func(context.Context) (*distlock.Lease, error)) <-chan Result {
	ch := make(chan Result, 1)
	go func() {
		l, err := try(ctx)
		ch <- Result{l, err}
	}()
	return ch
}

// entriesEach waits, up to bound, until every one of names has at least n
// entries, and reports whether they did; it looks every few milliseconds
// (a case uses it where either outcome is a valid cut point, never to
// assert a timing).
func entriesEach(t *testing.T, b Backend, k tryKind, names []string, n int, bound time.Duration) bool {
	t.Helper()
	end := time.Now().Add(bound)
	for {
		ok := true
		for _, name := range names {
			if len(k.entriesOf(t, b, name)) < n {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// noEntriesWithin waits, up to bound, until none of names has an entry.
func noEntriesWithin(t *testing.T, b Backend, k tryKind, names []string, bound time.Duration, why string) {
	t.Helper()
	end := time.Now().Add(bound)
	for {
		left := 0
		var all []string
		for _, name := range names {
			e := k.entriesOf(t, b, name)
			left += len(e)
			all = append(all, e...)
		}
		if left == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s: entries %q still there after %v", why, all, bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tryHolds checks that l, just taken by a TryLock of k on names, holds:
// valid, one entry per name, another session refused; then it unlocks l
// and checks that nothing is left.
func tryHolds(t *testing.T, b Backend, k tryKind, names []string, l *distlock.Lease, what string) {
	t.Helper()
	if err := l.Err(); err != nil {
		t.Fatalf("%s: the Lease's Err at once: %v", what, err)
	}
	if isClosed(l.Done()) {
		t.Fatalf("%s: the Lease's Done is closed at once", what)
	}
	if l.Token().IsZero() {
		t.Fatalf("%s: zero token", what)
	}
	k.wantEach(t, b, 1, what+": one entry per name, its own", names...)
	conflict := k.try
	if k.conflict != nil {
		conflict = k.conflict
	}
	other := conflict(t, b.Session(t), names)
	if ol, err := other(Ctx(t)); !errors.Is(err, distlock.ErrLocked) {
		if ol != nil {
			ol.Unlock(Ctx(t))
		}
		t.Fatalf("%s: another session's TryLock while it holds: %v, want ErrLocked", what, err)
	}
	MustUnlock(t, l)
	k.wantEach(t, b, 0, what+": unlocked", names...)
}

// trySweep is where a reply-lost case starts holding replies, in sixths
// of an unfaulted TryLock's duration into the call; -1 is before it.
var trySweep = []int{-1, 0, 1, 2, 3, 4, 5, 6}

// sweepName names a sweep point.
func sweepName(sixths int) string {
	if sixths < 0 {
		return "before"
	}
	return fmt.Sprintf("at%dof6", sixths)
}

// tryDuration measures an unfaulted TryLock of k, on a relayed session of
// its own (the median of five), for the sweep's points.
func tryDuration(t *testing.T, b Backend, k tryKind) time.Duration {
	t.Helper()
	s, _ := relayedSession(t, b)
	var ds []time.Duration
	for i := range 5 {
		names := k.names(fmt.Sprintf("measure%d", i))
		try := k.try(t, s, names)
		began := time.Now()
		l, err := try(Ctx(t))
		ds = append(ds, time.Since(began))
		if err != nil {
			t.Fatalf("%s: an unfaulted TryLock: %v", k.kind, err)
		}
		MustUnlock(t, l)
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// tryReplyLost: the replies to the TryLock's client are held (from before
// the call, or from a moment into it), so that its request is applied
// unanswered; once its entry appears (or a moment passed: the request
// held may be a read) the client's connections are reset and the answer
// is lost. A free lock is taken; a held one (held set) is refused with
// ErrLocked and nothing left.
func tryReplyLost(t *testing.T, b Backend, k tryKind, held bool) {
	unit := tryDuration(t, b, k) / 6
	t.Logf("%s: an unfaulted TryLock takes %v", k.kind, 6*unit)
	for _, sixths := range trySweep {
		t.Run(sweepName(sixths), func(t *testing.T) {
			d := time.Duration(max(sixths, 0)) * unit
			names := k.names(sweepName(sixths))
			var holder *distlock.Lease
			if held {
				holder = k.hold(t, b.Session(t), names)
			}
			s, faults := relayedSession(t, b)
			try := k.try(t, s, names)
			var release func()
			if sixths < 0 {
				release = mustFault(t, "hold the replies to the TryLock's client", faults.HoldReplies)
			}
			res := tryAsync(Ctx(t), try)
			if sixths >= 0 {
				time.Sleep(d) // the cut point swept, not a wait for an event
				release = mustFault(t, "hold the replies to the TryLock's client", faults.HoldReplies)
			}
			var (
				point string
				reset time.Time
			)
			select {
			case r := <-res:
				// Answered before the hold: the plain case, checked all the same.
				point = "answered before the hold"
				res = chanOf(r)
				release()
			default:
				switch {
				case !held && entriesEach(t, b, k, names, 1, 500*time.Millisecond):
					point = "applied, answer lost"
				case held && entriesEach(t, b, k, names[len(names)-1:], 2, 300*time.Millisecond):
					// Only if the refused TryLock wrote (ZooKeeper's create
					// after its look).
					point = "an entry made behind the holder, answer lost"
				default:
					point = "no entry made while held"
				}
				reset = time.Now()
				if err := faults.Reset(); err != nil {
					t.Fatalf("reset the TryLock's client's connections: %v", err)
				}
			}
			r := Recv(t, res, "the TryLock, its answer lost")
			after := ""
			if !reset.IsZero() {
				after = fmt.Sprintf(", returned %v after the reset", time.Since(reset).Round(100*time.Microsecond))
			}
			t.Logf("%s, cut %s (%v): %s%s: err %v", k.kind, sweepName(sixths), d, point, after, r.Err)
			if held {
				if r.Err == nil {
					r.Lease.Unlock(Ctx(t))
					t.Fatalf("%s (%s): the TryLock of a held lock succeeded", k.kind, point)
				}
				if !errors.Is(r.Err, distlock.ErrLocked) {
					t.Fatalf("%s (%s): the TryLock of a held lock: %v, want ErrLocked", k.kind, point, r.Err)
				}
				// The refused TryLock leaves nothing: the holder's entry only.
				noEntriesWithin(t, b, k, names[:len(names)-1], 3*s.TTL(), "refused: the free names")
				last := names[len(names)-1:]
				end := time.Now().Add(3 * s.TTL())
				for len(k.entriesOf(t, b, last[0])) != 1 {
					if time.Now().After(end) {
						t.Fatalf("refused: entries %q of the held name, want the holder's only", k.entriesOf(t, b, last[0]))
					}
					time.Sleep(20 * time.Millisecond)
				}
				MustUnlock(t, holder)
				k.wantEach(t, b, 0, "the holder unlocked", names...)
				return
			}
			if r.Err != nil {
				t.Fatalf("%s (%s): the TryLock of a free lock: %v, want it taken", k.kind, point, r.Err)
			}
			tryHolds(t, b, k, names, r.Lease, fmt.Sprintf("%s (%s)", k.kind, point))
		})
	}
}

// chanOf returns a channel holding r.
func chanOf(r Result) <-chan Result {
	ch := make(chan Result, 1)
	ch <- r
	return ch
}

// tryNotApplied: every byte between the TryLock's client and the store is
// held from before the call; a moment in, the client's connections are
// reset (what was held is lost: the request never reached a server), and
// then the cut heals. The free lock is taken.
func tryNotApplied(t *testing.T, b Backend, k tryKind) {
	names := k.names("notapplied")
	s, faults := relayedSession(t, b)
	try := k.try(t, s, names)
	heal := mustFault(t, "cut the TryLock's client off", faults.Cut)
	res := tryAsync(Ctx(t), try)
	// Let the request go out into the cut (nothing can reach a server
	// meanwhile, whatever the moment).
	select {
	case r := <-res:
		t.Fatalf("the TryLock returned while its client was cut off: %v", r.Err)
	case <-time.After(200 * time.Millisecond):
	}
	k.wantEach(t, b, 0, "the client cut off", names...)
	if err := faults.Reset(); err != nil {
		t.Fatalf("reset the TryLock's client's connections: %v", err)
	}
	heal()
	r := Recv(t, res, "the TryLock, its request lost")
	if r.Err != nil {
		t.Fatalf("%s: the TryLock of a free lock whose request was lost: %v, want it taken", k.kind, r.Err)
	}
	tryHolds(t, b, k, names, r.Lease, k.kind+" (request lost)")
}

// tryCtxEnds: the TryLock's client is cut off from before the call, and
// the call's context ends meanwhile: the call returns the context's
// error, not ErrLocked, and once the cut heals (what was held delivered)
// nothing is left, and the lock is free for another session.
func tryCtxEnds(t *testing.T, b Backend, k tryKind) {
	names := k.names("ctxends")
	s, faults := relayedSession(t, b)
	try := k.try(t, s, names)
	heal := mustFault(t, "cut the TryLock's client off", faults.Cut)
	ctx, cancel := context.WithTimeout(Ctx(t), time.Second)
	defer cancel()
	began := time.Now()
	_, err := try(ctx)
	took := time.Since(began)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("%s: the TryLock cut off with a 1 s context: %v (after %v), want the context's DeadlineExceeded", k.kind, err, took)
	}
	if took > 5*time.Second {
		t.Fatalf("%s: the TryLock with a 1 s context returned after %v", k.kind, took)
	}
	heal()
	// The client's next request follows what the cut held: once it is
	// answered, the held one has reached the store.
	probe := k.names("ctxends-probe")
	pl, err := k.try(t, s, probe)(Ctx(t))
	if err != nil {
		t.Fatalf("%s: a TryLock of other names once the cut healed: %v", k.kind, err)
	}
	MustUnlock(t, pl)
	noEntriesWithin(t, b, k, names, 3*s.TTL(), k.kind+": the cut healed after the TryLock's context ended")
	tryHolds(t, b, k, names, mustTry(t, k, b.Session(t), names), k.kind+": another session, after the cut healed")
}

// mustTry takes k on names with a TryLock on s, or fails the test.
func mustTry(t *testing.T, k tryKind, s Session, names []string) *distlock.Lease {
	t.Helper()
	l, err := k.try(t, s, names)(Ctx(t))
	if err != nil {
		t.Fatalf("%s: TryLock: %v", k.kind, err)
	}
	return l
}
