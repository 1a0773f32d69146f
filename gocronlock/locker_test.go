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
	for _, c := range []struct {
		name string
		b    gocronlock.Backend
		p    time.Duration
		opts []gocronlock.Option
	}{
		{"nil backend", gocronlock.Backend{}, time.Second, nil},
		{"period below a second", noBackend, 500 * time.Millisecond, nil},
		{"period not whole seconds", noBackend, 1500 * time.Millisecond, nil},
		{"unknown mode", noBackend, time.Second, []gocronlock.Option{gocronlock.WithMode("sometimes")}},
		{"bad prefix", noBackend, time.Second, []gocronlock.Option{gocronlock.WithPrefix("a//b")}},
		{"nil clock", noBackend, time.Second, []gocronlock.Option{gocronlock.WithClock(nil)}},
	} {
		if _, err := gocronlock.NewLocker(c.b, c.p, c.opts...); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	if _, err := gocronlock.NewElector(context.Background(), nil, "x"); !errors.Is(err, distlock.ErrNilClient) {
		t.Errorf("NewElector(nil): %v, want ErrNilClient", err)
	}
}
