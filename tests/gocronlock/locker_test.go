package gocronlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/gocronlock"
)

// noBackend is a Backend whose locks are never taken: for the checks that
// need no store.
var noBackend = gocronlock.Backend{
	Mutex: func(string) (distlock.Locker, error) { return nil, errors.New("not in this test") },
	Marks: func(string) (distlock.SlotMarks, error) { return nil, errors.New("not in this test") },
}

func TestLockName(t *testing.T) {
	l, err := gocronlock.NewLocker(noBackend, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, key := range []string{"report", "pkg.myJob", "pkg_myJob", "a/b", "a b", "..", ".", "", "ünïcode", strings.Repeat("x", 300), strings.Repeat("y", 300)} {
		name := l.LockName(key)
		if err := distlock.ValidateName(name); err != nil {
			t.Errorf("key %q: lock name %q: %v", key, name, err)
		}
		if other, ok := seen[name]; ok {
			t.Errorf("keys %q and %q share lock name %q", other, key, name)
		}
		seen[name] = key
	}
	if got := l.LockName("pkg.myJob"); got != "gocron/pkg_2emyJob" {
		t.Errorf("LockName(pkg.myJob) = %q", got)
	}
}

func TestSlot(t *testing.T) {
	l, _ := gocronlock.NewLocker(noBackend, 10*time.Second)
	base := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	for _, d := range []time.Duration{-4900 * time.Millisecond, 0, 4900 * time.Millisecond} {
		if got := l.Slot(base.Add(d)); got != "2026-12-01T08:00:00Z" {
			t.Errorf("Slot(08:00:00%+v) = %s, want the 08:00:00 slot", d, got)
		}
	}
	if got := l.Slot(base.Add(5100 * time.Millisecond)); got != "2026-12-01T08:00:10Z" {
		t.Errorf("Slot(08:00:05.1) = %s, want the next slot", got)
	}
	if err := distlock.ValidateSlot(l.Slot(base)); err != nil {
		t.Error(err)
	}
}

func TestNewLockerBadInput(t *testing.T) {
	withTTL := func(d time.Duration) gocronlock.Backend { b := noBackend; b.TTL = d; return b }
	for _, c := range []struct {
		name string
		b    gocronlock.Backend
		p    time.Duration
		opts []gocronlock.Option
		want error
	}{
		{"nil backend", gocronlock.Backend{}, time.Second, nil, distlock.ErrNilClient},
		{"nil etcd session", gocronlock.Etcd(nil), time.Second, nil, distlock.ErrNilClient},
		{"nil ZooKeeper session", gocronlock.ZooKeeper(nil), time.Second, nil, distlock.ErrNilClient},
		{"period below a second", noBackend, 500 * time.Millisecond, nil, gocronlock.ErrInvalidOption},
		{"period not whole seconds", noBackend, 1500 * time.Millisecond, nil, gocronlock.ErrInvalidOption},
		{"unknown mode", noBackend, time.Second, []gocronlock.Option{gocronlock.WithMode("sometimes")}, gocronlock.ErrInvalidOption},
		{"bad prefix", noBackend, time.Second, []gocronlock.Option{gocronlock.WithPrefix("a//b")}, distlock.ErrInvalidName},
		{"nil clock", noBackend, time.Second, []gocronlock.Option{gocronlock.WithClock(nil)}, gocronlock.ErrInvalidOption},
		{"zero timeout", noBackend, time.Second, []gocronlock.Option{gocronlock.WithTimeout(0)}, gocronlock.ErrInvalidOption},
		{"negative wait", noBackend, time.Second, []gocronlock.Option{gocronlock.WithWait(-time.Second)}, gocronlock.ErrInvalidOption},
		{"negative retention", noBackend, time.Second, []gocronlock.Option{gocronlock.WithRetention(-time.Second)}, gocronlock.ErrInvalidOption},
		{"TTL as long as the period", withTTL(2 * time.Second), 2 * time.Second, nil, gocronlock.ErrTTLTooLong},
		{"TTL longer than the period", withTTL(30 * time.Second), 5 * time.Second, nil, gocronlock.ErrTTLTooLong},
		{"TTL longer than the wait", withTTL(2 * time.Second), 5 * time.Second, []gocronlock.Option{gocronlock.WithWait(time.Second)}, gocronlock.ErrTTLTooLong},
	} {
		_, err := gocronlock.NewLocker(c.b, c.p, c.opts...)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want an error wrapping %v", c.name, err, c.want)
		}
	}
	if _, err := gocronlock.NewLocker(withTTL(30*time.Second), 5*time.Second); err == nil || !strings.Contains(err.Error(), "TTL below 5s") {
		t.Errorf("TTL 30s, period 5s: %v, want the TTL to pick", err)
	}
	// What the bound allows: a TTL below the period (or the wait), and
	// any TTL in AtMostOnce mode, which never reruns a slot.
	for _, c := range []struct {
		name string
		b    gocronlock.Backend
		p    time.Duration
		opts []gocronlock.Option
	}{
		{"TTL below the period", withTTL(2 * time.Second), 4 * time.Second, nil},
		{"TTL below the wait", withTTL(2 * time.Second), 10 * time.Second, []gocronlock.Option{gocronlock.WithWait(3 * time.Second)}},
		{"TTL unknown", withTTL(0), time.Second, nil},
		{"AtMostOnce", withTTL(30 * time.Second), time.Second, []gocronlock.Option{gocronlock.WithMode(distlock.AtMostOnce)}},
	} {
		if _, err := gocronlock.NewLocker(c.b, c.p, c.opts...); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if _, err := gocronlock.NewElector(context.Background(), nil, "x"); !errors.Is(err, distlock.ErrNilClient) {
		t.Errorf("NewElector(nil): %v, want ErrNilClient", err)
	}
}

// TestSlotLockMarks: a job's markers accept a lease of a slot's own lock
// (distlock.SlotLockName), written with only the slot lock's entry
// checked: a rerun of an older slot still marks after a newer slot
// marked (one fence across slot locks would refuse it), a lease of
// another lock is refused, and a slot lock whose session ended cannot
// mark.
func TestSlotLockMarks(t *testing.T) {
	for _, kind := range []string{"etcd", "zk"} {
		t.Run(kind, func(t *testing.T) {
			newInst := store(t, kind)
			a, b := newInst(t), newInst(t)
			ctx := context.Background()
			const job = "jobs/marked"
			marks, err := a.b.Marks(job)
			if err != nil {
				t.Fatal(err)
			}
			take := func(in instance, name string) *distlock.Lease {
				t.Helper()
				m, err := in.b.Mutex(name)
				if err != nil {
					t.Fatal(err)
				}
				l, err := m.Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Unlock(context.Background()) })
				return l
			}
			mark := func(l *distlock.Lease, slot string) error {
				return marks.Mark(ctx, l, distlock.SlotMarker{Slot: slot, Token: l.Token().String(), Mode: distlock.AtLeastOnce, Marked: time.Now().UTC()})
			}
			const older, newer = "2026-12-01T08:00:00Z", "2026-12-01T08:00:02Z"
			// The older slot's rerun holds its lock, taken before the newer
			// slot's (lower sequence numbers), and marks after it.
			lo := take(b, distlock.SlotLockName(job, older))
			ln := take(a, distlock.SlotLockName(job, newer))
			if err := mark(ln, newer); err != nil {
				t.Fatalf("mark the newer slot: %v", err)
			}
			if err := mark(lo, older); err != nil {
				t.Fatalf("mark the older slot after the newer: %v", err)
			}
			if err := mark(lo, older); !errors.Is(err, distlock.ErrSlotDone) {
				t.Fatalf("mark a marked slot: %v, want ErrSlotDone", err)
			}
			if err := mark(ln, older); err == nil || errors.Is(err, distlock.ErrSlotDone) {
				t.Fatalf("mark slot %s with slot %s's lease: %v, want it refused", older, newer, err)
			}
			other := take(a, "jobs/other")
			if err := mark(other, "2026-12-01T08:00:04Z"); err == nil {
				t.Fatal("mark with another lock's lease: no error")
			}
			// The job lock's own lease still goes through its fence.
			if err := mark(take(a, job), "2026-12-01T08:00:06Z"); err != nil {
				t.Fatalf("mark with the job lock's lease: %v", err)
			}
			// A slot lock's holder whose session ended cannot mark.
			const gone = "2026-12-01T08:00:08Z"
			lg := take(b, distlock.SlotLockName(job, gone))
			b.end(t)
			select {
			case <-lg.Done():
			case <-time.After(30 * time.Second):
				t.Fatal("the lease did not end with its session")
			}
			if err := mark(lg, gone); !errors.Is(err, distlock.ErrLost) {
				t.Fatalf("mark after the session ended: %v, want ErrLost", err)
			}
			if m, err := marks.Marker(ctx, gone); err != nil || m != nil {
				t.Fatalf("marker of slot %s: %v, %v; want none", gone, m, err)
			}
		})
	}
}

// TestLockerWaitEnds: Lock waits for the slot's lock no longer than
// WithWait's bound (or the slot's end), then fails with an error wrapping
// distlock.ErrLocked, which gocron takes for a skip; a job lock held by
// someone does not block the slot's run.
func TestLockerWaitEnds(t *testing.T) {
	for _, kind := range []string{"etcd", "zk"} {
		t.Run(kind, func(t *testing.T) {
			newInst := store(t, kind)
			a, b := newInst(t), newInst(t)
			ctx := context.Background()
			at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
			l, err := gocronlock.NewLocker(b.b, 10*time.Second, gocronlock.WithWait(300*time.Millisecond), gocronlock.WithClock(func() time.Time { return at }))
			if err != nil {
				t.Fatal(err)
			}
			name := l.LockName("waited")
			hold := func(lock string) *distlock.Lease {
				m, err := a.b.Mutex(lock)
				if err != nil {
					t.Fatal(err)
				}
				lease, err := m.Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return lease
			}
			job := hold(name)
			defer job.Unlock(ctx)
			lk, err := l.Lock(ctx, "waited")
			if err != nil {
				t.Fatalf("Lock with the job lock held elsewhere: %v", err)
			}
			if err := lk.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			at = at.Add(10 * time.Second) // the next slot
			slot := hold(distlock.SlotLockName(name, l.Slot(at)))
			defer slot.Unlock(ctx)
			start := time.Now()
			_, err = l.Lock(ctx, "waited")
			if waited := time.Since(start); !errors.Is(err, distlock.ErrLocked) || waited < 300*time.Millisecond || waited > 10*time.Second {
				t.Fatalf("Lock with the slot's lock held: %v after %v, want ErrLocked after about 300ms", err, waited)
			}
		})
	}
}
