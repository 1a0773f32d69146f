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
