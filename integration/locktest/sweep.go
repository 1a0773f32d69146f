package locktest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// SweepConfig shapes DeadlineSweep.
type SweepConfig struct {
	// Max is the longest deadline tried (default 6 ms); deadlines go from
	// 0 to Max in Step increments (default 20 µs, 301 tries per kind).
	Max, Step time.Duration
	// Settle bounds the wait, after each kind's sweep, for the library's
	// cleanup (which may finish in the background) to leave only the
	// holder's entry (default 30 s). A failure bound, not a timing
	// assertion: how long it took is logged.
	Settle time.Duration
}

func (c SweepConfig) deadlines() []time.Duration {
	if c.Max == 0 {
		c.Max = 6 * time.Millisecond
	}
	if c.Step == 0 {
		c.Step = 20 * time.Microsecond
	}
	var ds []time.Duration
	for d := time.Duration(0); d <= c.Max; d += c.Step {
		ds = append(ds, d)
	}
	return ds
}

// acquirer is one way of taking a lock: it returns the release.
type acquirer func(ctx context.Context, s Session, name string) (func(ctx context.Context) error, error)

// via is take as an acquirer (see endrace.go's takers).
func via(take taker) acquirer {
	return func(ctx context.Context, s Session, name string) (func(context.Context) error, error) {
		h, err := take(ctx, s, name)
		if err != nil {
			return nil, err
		}
		return h.release, nil
	}
}

func viaLock(t *testing.T) acquirer            { return via(takeLock(t)) }
func viaRW(t *testing.T, shared bool) acquirer { return via(takeRW(t, shared)) }
func viaCampaign(t *testing.T) acquirer        { return via(takeCampaign(t)) }

// sweepStats counts what the tries of one kind did.
type sweepStats struct {
	tries, timedOut, acquired, locked int
	// visible counts tries after which the lock had more entries than
	// before: the caller's entry still listed when its call had returned.
	visible  int
	wrongErr []string
}

func (st *sweepStats) record(err error, what string) {
	st.tries++
	switch {
	case err == nil:
		st.acquired++
	case errors.Is(err, context.DeadlineExceeded):
		st.timedOut++
	case errors.Is(err, distlock.ErrLocked):
		st.locked++
	default:
		if len(st.wrongErr) < 5 {
			st.wrongErr = append(st.wrongErr, what+": "+err.Error())
		} else {
			st.wrongErr = append(st.wrongErr[:5], "…")
		}
	}
}

// DeadlineSweep checks that a Lock ended mid-enqueue leaves nothing
// behind: while another session holds the lock, a caller's Lock (Mutex.Lock, RWMutex.RLock behind a
// writer, RWMutex.Lock behind a reader, Election.Campaign behind a leader)
// is given a deadline swept from 0 to a few milliseconds, so that it ends
// at every point of its enqueue: before the request goes out, while it is
// in flight, after the server applied it but before the answer came back,
// while waiting. For every kind it checks, by counts:
//
//   - every failed call's error matches context.DeadlineExceeded (never a
//     store's own timeout);
//   - once the library's cleanup has finished (waited for by polling the
//     store, with a generous bound), only the holder's entry is left: the
//     caller, whose Lock failed, has nothing to Unlock, and its session
//     lives on, so an entry of its left behind would block the lock for as
//     long as it lives;
//   - a third client acquires as soon as the holder releases.
//
// Then TryLock is swept the same way on a free lock (where its write
// happens), and on a held one. The caller's session stays open throughout,
// as in a real process that goes on after a failed Lock.
func DeadlineSweep(t *testing.T, b Backend, cfg SweepConfig) {
	if cfg.Settle == 0 {
		cfg.Settle = 30 * time.Second
	}
	ds := cfg.deadlines()
	holder, caller, third := b.Session(t), b.Session(t), b.Session(t)
	kinds := []struct {
		name          string
		hold, attempt acquirer
	}{
		{"Mutex.Lock", viaLock(t), viaLock(t)},
		{"RWMutex.RLock", viaRW(t, false), viaRW(t, true)},
		{"RWMutex.Lock", viaRW(t, true), viaRW(t, false)},
		{"Election.Campaign", viaCampaign(t), viaCampaign(t)},
	}
	total := 0
	for i, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			name := fmt.Sprintf("sweep-%d", i)
			release, err := k.hold(Ctx(t), holder, name)
			if err != nil {
				t.Fatalf("holder: %v", err)
			}
			var st sweepStats
			for _, d := range ds {
				before := len(b.Entries(t, name))
				ctx, cancel := context.WithTimeout(context.Background(), d)
				rel, err := k.attempt(ctx, caller, name)
				cancel()
				st.record(err, fmt.Sprintf("deadline %v", d))
				if err == nil {
					t.Errorf("deadline %v: acquired while the lock is held", d)
					rel(Ctx(t))
				}
				if len(b.Entries(t, name)) > before {
					st.visible++
				}
			}
			total += st.tries
			left, took := settle(t, b, name, 1, cfg.Settle)
			t.Logf("%s: %d tries: %d timed out, %d other errors; caller's entry still listed at return: %d; "+
				"left behind after cleanup: %d (cleanup settled in %v)",
				k.name, st.tries, st.timedOut, len(st.wrongErr), st.visible, left, took.Round(time.Millisecond))
			if len(st.wrongErr) > 0 {
				t.Errorf("%s: errors not matching context.DeadlineExceeded: %q", k.name, st.wrongErr)
			}
			if left > 0 {
				t.Errorf("%s: %d of %d tries left their entry behind: %v", k.name, left, st.tries, b.Entries(t, name))
			}
			if err := release(Ctx(t)); err != nil {
				t.Fatalf("holder's release: %v", err)
			}
			thirdAcquires(t, b, k.hold, third, name, left > 0)
		})
	}

	// TryLock writes its entry only when the lock looks free: sweep it on
	// a free lock, where the write is what a deadline interrupts, and on a
	// held one, where it must write nothing.
	for _, held := range []bool{false, true} {
		t.Run(fmt.Sprintf("TryLock/held=%v", held), func(t *testing.T) {
			name := fmt.Sprintf("sweep-try-%v", held)
			want := 0
			if held {
				l := MustLock(t, mutex(t, holder, name))
				defer MustUnlock(t, l)
				want = 1
			}
			m := mutex(t, caller, name)
			var st sweepStats
			for _, d := range ds {
				before := len(b.Entries(t, name))
				ctx, cancel := context.WithTimeout(context.Background(), d)
				l, err := m.TryLock(ctx)
				cancel()
				st.record(err, fmt.Sprintf("deadline %v", d))
				if err == nil {
					if held {
						t.Errorf("deadline %v: TryLock acquired a held lock", d)
					}
					MustUnlock(t, l)
				}
				if len(b.Entries(t, name)) > before {
					st.visible++
				}
			}
			total += st.tries
			left, took := settle(t, b, name, want, cfg.Settle)
			t.Logf("TryLock (held=%v): %d tries: %d acquired, %d locked, %d timed out, %d other errors; "+
				"entry still listed at return: %d; left behind after cleanup: %d (cleanup settled in %v)",
				held, st.tries, st.acquired, st.locked, st.timedOut, len(st.wrongErr), st.visible, left, took.Round(time.Millisecond))
			if len(st.wrongErr) > 0 {
				t.Errorf("TryLock: errors matching neither context.DeadlineExceeded nor ErrLocked: %q", st.wrongErr)
			}
			if left > 0 {
				t.Errorf("TryLock: %d of %d tries left their entry behind: %v", left, st.tries, b.Entries(t, name))
			}
			if !held {
				l, err := mutex(t, third, name).TryLock(Ctx(t))
				if err != nil {
					t.Fatalf("a third client's TryLock on the free lock: %v", err)
				}
				MustUnlock(t, l)
			}
		})
	}
	total += sweepSemaphore(t, b, cfg, ds, holder, caller, third)
	t.Logf("%d tries in all", total)
}

// sweepSemaphore is the sweep for a semaphore's Acquire (behind a holder
// of its one permit: cut off in its direct claim, its line entry's
// enqueue, or its wait) and TryAcquire (on a free semaphore, where its
// claim is the write a deadline interrupts, and on a full one). It
// returns the number of tries.
func sweepSemaphore(t *testing.T, b Backend, cfg SweepConfig, ds []time.Duration, holder, caller, third Session) int {
	count := func(name string) int {
		line, slots := b.SemaphoreEntries(t, name)
		return len(line) + len(slots)
	}
	total := 0
	for _, k := range []struct {
		name    string
		n       int
		held    bool
		attempt func(s Semaphore, ctx context.Context) (*distlock.Permit, error)
	}{
		{"Semaphore.Acquire", 1, true, Semaphore.Acquire},
		{"Semaphore.TryAcquire/held=false", 2, false, Semaphore.TryAcquire},
		{"Semaphore.TryAcquire/held=true", 1, true, Semaphore.TryAcquire},
	} {
		t.Run(k.name, func(t *testing.T) {
			name := fmt.Sprintf("sweep-sem-%d-%v", k.n, k.held)
			want := 0
			var hp *distlock.Permit
			if k.held {
				hp = MustAcquire(t, semaphore(t, holder, name, k.n))
				want = 1
			}
			sem := semaphore(t, caller, name, k.n)
			var st sweepStats
			for _, d := range ds {
				before := count(name)
				ctx, cancel := context.WithTimeout(context.Background(), d)
				p, err := k.attempt(sem, ctx)
				cancel()
				st.record(err, fmt.Sprintf("deadline %v", d))
				if err == nil {
					if k.held {
						t.Errorf("deadline %v: acquired a permit of a full semaphore", d)
					}
					MustRelease(t, p)
				}
				if count(name) > before {
					st.visible++
				}
			}
			left, took := settleCount(func() int { return count(name) }, want, cfg.Settle)
			t.Logf("%s: %d tries: %d acquired, %d locked, %d timed out, %d other errors; entry still listed at return: %d; "+
				"left behind after cleanup: %d (cleanup settled in %v)",
				k.name, st.tries, st.acquired, st.locked, st.timedOut, len(st.wrongErr), st.visible, left, took.Round(time.Millisecond))
			if len(st.wrongErr) > 0 {
				t.Errorf("%s: errors matching neither context.DeadlineExceeded nor ErrLocked: %q", k.name, st.wrongErr)
			}
			if left > 0 {
				line, slots := b.SemaphoreEntries(t, name)
				t.Errorf("%s: %d of %d tries left entries behind: line %v, slots %v", k.name, left, st.tries, line, slots)
			}
			if hp != nil {
				MustRelease(t, hp)
			}
			ctx, cancel := context.WithTimeout(context.Background(), Timeout)
			defer cancel()
			p, err := semaphore(t, third, name, k.n).Acquire(ctx)
			if err != nil {
				t.Fatalf("a third client could not acquire after the holder released: %v", err)
			}
			MustRelease(t, p)
			total += st.tries
		})
	}
	return total
}

// settle polls name's entries until at most want are left or bound
// passes; it returns how many more than want were left, and how long it
// waited. Polling, not a notification: what is awaited is the absence of
// a write that may still come, and the caller's cleanup runs in its own
// process as far as the test knows.
func settle(t *testing.T, b Backend, name string, want int, bound time.Duration) (left int, took time.Duration) {
	t.Helper()
	return settleCount(func() int { return len(b.Entries(t, name)) }, want, bound)
}

// settleCount is settle for any count of entries.
func settleCount(count func() int, want int, bound time.Duration) (left int, took time.Duration) {
	start := time.Now()
	for {
		n := count()
		if n <= want || time.Since(start) > bound {
			return max(n-want, 0), time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// thirdAcquires checks that another client acquires name once the holder
// has released it. With entries known to be left behind it gives up
// sooner: they block it for as long as the caller's session lives.
func thirdAcquires(t *testing.T, b Backend, acquire acquirer, s Session, name string, blocked bool) {
	t.Helper()
	bound := Timeout
	if blocked {
		bound = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	release, err := acquire(ctx, s, name)
	if err != nil {
		t.Errorf("a third client could not acquire after the holder released (entries %v): %v", b.Entries(t, name), err)
		return
	}
	if err := release(Ctx(t)); err != nil {
		t.Fatal(err)
	}
}
