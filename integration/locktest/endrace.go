package locktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// EndRaceOffsets are the offsets EndRace sweeps: how long before (negative)
// or after (positive) the holder's release the waiter's session is ended
// on the server. The end of an etcd lease and the release are each one
// request, so these straddle the point where the two land in either
// order.
var EndRaceOffsets = []time.Duration{
	-10 * time.Millisecond, -6 * time.Millisecond, -3 * time.Millisecond, -1 * time.Millisecond,
	0,
	1 * time.Millisecond, 3 * time.Millisecond, 10 * time.Millisecond,
}

// endRaces is how many races EndRace runs per offset and kind: 20, or
// DISTLOCK_ENDRACE_RACES.
func endRaces() int {
	if n, err := strconv.Atoi(os.Getenv("DISTLOCK_ENDRACE_RACES")); err == nil && n > 0 {
		return n
	}
	return 20
}

// held is one acquisition, of whatever kind: how to let go of it and how
// it says it was lost.
type held struct {
	release func(context.Context) error
	done    <-chan struct{}
	err     func() error
}

type taker func(ctx context.Context, s Session, name string) (held, error)

func takeLock(t *testing.T) taker {
	return func(ctx context.Context, s Session, name string) (held, error) {
		l, err := mutex(t, s, name).Lock(ctx)
		if err != nil {
			return held{}, err
		}
		return held{l.Unlock, l.Done(), l.Err}, nil
	}
}

func takeRW(t *testing.T, shared bool) taker {
	return func(ctx context.Context, s Session, name string) (held, error) {
		m := rwmutex(t, s, name)
		lock := m.Lock
		if shared {
			lock = m.RLock
		}
		l, err := lock(ctx)
		if err != nil {
			return held{}, err
		}
		return held{l.Unlock, l.Done(), l.Err}, nil
	}
}

func takeCampaign(t *testing.T) taker {
	return func(ctx context.Context, s Session, name string) (held, error) {
		l, err := election(t, s, name).Campaign(ctx, "candidate")
		if err != nil {
			return held{}, err
		}
		return held{l.Resign, l.Done(), l.Err}, nil
	}
}

func takePermit(t *testing.T) taker {
	return func(ctx context.Context, s Session, name string) (held, error) {
		sem, err := s.Semaphore(name, 1)
		if err != nil {
			t.Fatal(err)
		}
		p, err := sem.Acquire(ctx)
		if err != nil {
			return held{}, err
		}
		return held{p.Release, p.Done(), p.Err}, nil
	}
}

// lockedSessions is a Backend whose Session may be called concurrently.
type lockedSessions struct {
	Backend
	mu *sync.Mutex
}

func (b lockedSessions) Session(t *testing.T) Session {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Backend.Session(t)
}

type tookResult struct {
	h   held
	err error
	// lost receives when a granted h's Done closed.
	lost <-chan time.Time
	// at is when the call returned.
	at time.Time
}

func takeAsync(ctx context.Context, take taker, s Session, name string) <-chan tookResult {
	ch := make(chan tookResult, 1)
	go func() {
		h, err := take(ctx, s, name)
		lost := make(chan time.Time, 1)
		if err == nil {
			go func() {
				<-h.done
				lost <- time.Now()
			}()
		}
		ch <- tookResult{h, err, lost, time.Now()}
	}()
	return ch
}

// endRaceStats counts what the races of one kind did.
type endRaceStats struct {
	mu           sync.Mutex
	races        int
	notRaced     int // given up before the race: see notRaced in endRaceOnce
	wentFirst    int // the waiter's entry was deleted before the holder's
	failed       int // the waiter's call returned an error
	granted      int // granted, its entry deleted after the holder's
	phantom      int // granted although its entry went first: the bug
	maxLost      time.Duration
	maxSuccessor time.Duration
	// releaseLag and endLag are running estimates of how long a release
	// and a session's end take from the call to the deletion heard.
	releaseLag, endLag time.Duration
}

// lags returns the current estimates.
func (st *endRaceStats) lags() (release, end time.Duration) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.releaseLag, st.endLag
}

// racers are the sessions a kind's races share: the holder's and the third
// client's. A cluster overloaded past its sessions' TTL (a CI machine's
// two CPUs running the race detector) can end one of them; the races that
// follow get new ones instead of failing for it.
type racers struct {
	t             *testing.T // the kind's test, which owns the sessions
	b             Backend
	mu            sync.Mutex
	holder, third Session
}

func (r *racers) get() (holder, third Session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.holder, r.third
}

// renew replaces s, the holder's or the third client's session, once it
// has ended; a session already replaced is left alone.
func (r *racers) renew(s Session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch s {
	case r.holder:
		r.holder = r.b.Session(r.t)
	case r.third:
		r.third = r.b.Session(r.t)
	}
}

// endRaceParallel is how many races of one kind run at once.
const endRaceParallel = 4

// endRace is the race of a waiter whose session is ended on the server
// (etcd: its lease revoked; ZooKeeper: its session expired) around the
// moment the holder ahead of it releases, for every kind of waiter: a
// Mutex waiter, a reader behind a writer, a writer behind a reader, a
// candidate, a semaphore's waiter. The end is swept from 10 ms before the
// release to 10 ms after, EndRaceOffsets × endRaces times per kind. The
// store itself says which of the two entries went first (Backend's
// DeletionOrder). Checked:
//
//   - a waiter whose entry went before the holder's is never told it
//     acquired (its call fails, with its session's or its entry's end);
//   - a waiter granted before its entry went hears that it lost the lock
//     (Done closes), bounded by Timeout, and the longest time it took is
//     logged;
//   - a third client, queued behind the waiter, acquires within twice the
//     session TTL of the release;
//   - nothing is left in the queue.
func endRace(t *testing.T, b Backend) {
	kinds := []struct {
		name              string
		hold, wait, third taker
		semaphore         bool
	}{
		{"Mutex", takeLock(t), takeLock(t), takeLock(t), false},
		{"RLockBehindWriter", takeRW(t, false), takeRW(t, true), takeRW(t, false), false},
		{"LockBehindReader", takeRW(t, true), takeRW(t, false), takeRW(t, true), false},
		{"Campaign", takeCampaign(t), takeCampaign(t), takeCampaign(t), false},
		{"Acquire", takePermit(t), takePermit(t), takePermit(t), true},
	}
	// The kinds race in parallel, on sessions of their own; the backend's
	// Session is not safe for concurrent use.
	var mu sync.Mutex
	b = lockedSessions{Backend: b, mu: &mu}
	races := endRaces()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			rs := &racers{t: t, b: b, holder: b.Session(t), third: b.Session(t)}
			var st endRaceStats
			for i, d := range EndRaceOffsets {
				var wg sync.WaitGroup
				for p := 0; p < endRaceParallel; p++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for r := p; r < races; r += endRaceParallel {
							name := fmt.Sprintf("endrace-%s-%d-%d", k.name, i, r)
							t.Run(name, func(t *testing.T) {
								endRaceOnce(t, b, rs, name, d, k.hold, k.wait, k.third, k.semaphore, &st)
							})
						}
					}()
				}
				wg.Wait()
				if t.Failed() {
					return
				}
			}
			if st.races < races*len(EndRaceOffsets)/4 {
				t.Errorf("%s: only %d of %d races could be run (%d given up: the cluster was too loaded to set them up)", k.name, st.races, races*len(EndRaceOffsets), st.notRaced)
			}
			t.Logf("%s: %d races (%d given up): waiter's entry went first in %d, waiter failed %d, granted (and then lost) %d; phantom grants %d; longest from a granted waiter's entry deleted to its Done %v; longest from the release to the third client's grant %v; the release took %v to land, the end %v",
				k.name, st.races, st.notRaced, st.wentFirst, st.failed, st.granted, st.phantom, st.maxLost, st.maxSuccessor, st.releaseLag, st.endLag)
			if st.phantom > 0 {
				t.Errorf("%s: %d waiters were told they acquired although their entry was deleted before the holder's", k.name, st.phantom)
			}
		})
	}
}

func endRaceOnce(t *testing.T, b Backend, rs *racers, name string, d time.Duration, hold, wait, take3 taker, semaphore bool, st *endRaceStats) {
	t.Helper()
	// One race is a dozen requests in a row; on a cluster slowed to a
	// second a request (a CI machine of two CPUs under the race detector)
	// Ctx's bound alone would end it before its checks. The bounds that
	// matter are the checks' own (the third client's 2 × TTL).
	ctx, cancel := context.WithTimeout(context.Background(), 3*Timeout)
	t.Cleanup(cancel)
	holder, third := rs.get()
	// notRaced gives the race up before it started: a cluster too loaded to
	// set it up (a call timing out, a session of the holder's or the third
	// client's ending) says nothing about the waiter's end racing the
	// release.
	notRaced := func(why string, args ...any) {
		t.Logf("%s: not raced: %s", name, fmt.Sprintf(why, args...))
		st.mu.Lock()
		st.notRaced++
		st.mu.Unlock()
	}
	ended := func(err error) bool {
		return errors.Is(err, distlock.ErrSessionExpired) || errors.Is(err, distlock.ErrSessionClosed)
	}
	// The holder's acquisition is not what is tested: an overloaded
	// cluster's timeout is tried again.
	h, err := hold(ctx, holder, name)
	for err != nil && ctx.Err() == nil && !ended(err) {
		t.Logf("%s: holder: %v; again", name, err)
		h, err = hold(ctx, holder, name)
	}
	if ended(err) {
		rs.renew(holder)
		notRaced("the holder's session ended: %v", err)
		return
	}
	if err != nil {
		t.Fatalf("%s: holder: %v", name, err)
	}
	lost := func() bool {
		select {
		case <-h.done:
			return true
		default:
			return false
		}
	}
	// giveUp releases what was taken once the race cannot be run: the
	// holder's lock, and what the waiter's and third client's calls still
	// pending (nil: none) return.
	giveUp := func(wres, tres <-chan tookResult) {
		_ = h.release(ctx)
		if lost() {
			rs.renew(holder)
		}
		for _, ch := range []<-chan tookResult{wres, tres} {
			if ch == nil {
				continue
			}
			if r := Recv(t, ch, name+": a call given up"); r.err == nil {
				_ = r.h.release(ctx)
			} else if ended(r.err) && ch == tres {
				rs.renew(third)
			}
		}
	}
	waiter := b.Session(t)
	wres := takeAsync(ctx, wait, waiter, name)
	keysOf := func() []string {
		if !semaphore {
			return b.Entries(t, name)
		}
		line, slots := b.SemaphoreEntries(t, name)
		return append(slots, line...)
	}
	// queued waits until name has n entries, or res's call has returned
	// first (a cluster too loaded to take the enqueue, or one that ended
	// the holder's session): then the race was not set up, and is given
	// up.
	queued := func(n int, res <-chan tookResult) (ok, returned bool) {
		deadline := time.Now().Add(Timeout)
		for len(keysOf()) < n {
			select {
			case r := <-res:
				if r.err == nil && !lost() {
					t.Fatalf("%s: acquired while the holder holds", name)
				}
				if r.err == nil {
					_ = r.h.release(ctx)
					notRaced("the holder lost its lock before the race (%v)", h.err())
				} else {
					if ended(r.err) && res != wres {
						rs.renew(third)
					}
					notRaced("a call failed before its entry showed: %v", r.err)
				}
				return false, true
			case <-time.After(10 * time.Millisecond):
			}
			if lost() {
				notRaced("the holder lost its lock before the race (%v)", h.err())
				return false, false
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: entries %q, want %d", name, keysOf(), n)
			}
		}
		return true, false
	}
	if ok, returned := queued(2, wres); !ok {
		if returned {
			giveUp(nil, nil)
		} else {
			giveUp(wres, nil)
		}
		return
	}
	keys := keysOf()
	if len(keys) != 2 {
		if lost() {
			notRaced("the holder lost its lock before the race (%v)", h.err())
			waiter.End(t)
			giveUp(wres, nil)
			return
		}
		t.Fatalf("%s: entries %q, want the holder's and the waiter's", name, keys)
	}
	hKey, wKey := keys[0], keys[1]
	tres := takeAsync(ctx, take3, third, name)
	if ok, returned := queued(3, tres); !ok {
		waiter.End(t)
		if returned {
			giveUp(wres, nil)
		} else {
			giveUp(wres, tres)
		}
		return
	}
	order := b.DeletionOrder(t, name, []string{hKey, wKey})

	// d is when the session's end should land relative to the release's;
	// each takes its own time to reach the store (ZooKeeper's expiry goes
	// through a connection of its own), so each is started early by how
	// long it took to be heard of in the races before.
	releaseLag, endLag := st.lags()
	offset := d + releaseLag - endLag
	released := make(chan time.Time, 1)
	relErr := make(chan error, 1)
	go func() {
		if offset < 0 {
			time.Sleep(-offset)
		}
		released <- time.Now()
		relErr <- h.release(ctx)
	}()
	if offset > 0 {
		time.Sleep(offset)
	}
	endStart := time.Now()
	waiter.End(t)
	if err := Recv(t, relErr, name+": the holder's release"); err != nil {
		if lost() {
			// The session ended under an overloaded cluster just as
			// the race ran: which entry went first says nothing.
			rs.renew(holder)
			notRaced("the holder lost its lock at the release (%v)", h.err())
			if w := Recv(t, wres, name+": the waiter's call"); w.err == nil {
				_ = w.h.release(ctx)
			}
			giveUp(nil, tres)
			return
		}
		t.Fatalf("%s: holder's release: %v", name, err)
	}
	relAt := <-released
	gone, at := order()
	hGone, wGone := at[0], at[1]
	if gone[0] == wKey {
		hGone, wGone = at[1], at[0]
	}
	wentFirst := gone[0] == wKey
	w := Recv(t, wres, name+": the waiter's call")

	st.mu.Lock()
	if st.races == 0 {
		st.releaseLag, st.endLag = hGone.Sub(relAt), wGone.Sub(endStart)
	} else {
		st.releaseLag = (3*st.releaseLag + hGone.Sub(relAt)) / 4
		st.endLag = (3*st.endLag + wGone.Sub(endStart)) / 4
	}
	st.races++
	if wentFirst {
		st.wentFirst++
	}
	switch {
	case w.err != nil:
		st.failed++
	case wentFirst:
		st.phantom++
		t.Errorf("%s (end %v from the release): the waiter was told it acquired, but its entry %s was deleted before the holder's %s", name, d, wKey, hKey)
	default:
		st.granted++
	}
	st.mu.Unlock()
	if w.err == nil {
		lostAt := Recv(t, w.lost, name+": the granted waiter's Done after its entry was deleted")
		st.mu.Lock()
		st.maxLost = max(st.maxLost, lostAt.Sub(wGone))
		st.mu.Unlock()
		_ = w.h.release(ctx) // reports the loss
	}

	ttl := third.TTL()
	select {
	case s := <-tres:
		if ended(s.err) {
			rs.renew(third)
			t.Logf("%s: the third client's session ended (an overloaded cluster): %v", name, s.err)
			return
		}
		if s.err != nil {
			t.Fatalf("%s: third client: %v", name, s.err)
		}
		st.mu.Lock()
		st.maxSuccessor = max(st.maxSuccessor, s.at.Sub(relAt))
		st.mu.Unlock()
		if err := s.h.release(ctx); err != nil {
			t.Fatalf("%s: third client's release: %v", name, err)
		}
	case <-time.After(2*ttl - time.Since(relAt)):
		t.Fatalf("%s: the third client did not acquire within 2 × TTL (%v) of the release", name, 2*ttl)
	}
	left, _ := settleCount(func() int { return len(keysOf()) }, 0, Timeout)
	if left > 0 {
		t.Fatalf("%s: entries %q left behind", name, keysOf())
	}
}
