package zklock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
)

// TestCompatCancelBehindForeign: in every mode, a Lock (or RLock, or
// Campaign) waiting behind another client's entry returns ctx's cause
// when ctx ends and leaves no node of its own behind.
func TestCompatCancelBehindForeign(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	conn, cevents := connect(t, ens, 0)
	drain(cevents)
	for _, c := range []struct {
		mode    distlock.Compat
		foreign string // the foreign entry's base, as its client names it
		take    func(s recipe.Backend, name string) (func(ctx context.Context) error, error)
	}{
		{distlock.CompatCurator, "_c_" + curatorUUID + "-lock-", mutexTake(distlock.CompatCurator)},
		{distlock.CompatGoZookeeper, "_c_" + kazooHex + "-lock-", mutexTake(distlock.CompatGoZookeeper)},
		{distlock.CompatKazoo, kazooHex + "__lock__", mutexTake(distlock.CompatKazoo)},
		{distlock.CompatCurator, "_c_" + curatorUUID + "-__WRIT__", func(s recipe.Backend, name string) (func(ctx context.Context) error, error) {
			rw, err := recipe.NewRWMutex(s, name, distlock.WithCompat(distlock.CompatCurator))
			return func(ctx context.Context) error { _, err := rw.RLock(ctx); return err }, err
		}},
		{distlock.CompatCuratorLatch, "_c_" + curatorUUID + "-latch-", func(s recipe.Backend, name string) (func(ctx context.Context) error, error) {
			e, err := recipe.NewElection(s, name, distlock.WithElectionCompat(distlock.CompatCuratorLatch))
			return func(ctx context.Context) error { _, err := e.Campaign(ctx, "v"); return err }, err
		}},
	} {
		t.Run(string(c.mode)+"/"+c.foreign[len(c.foreign)-8:], func(t *testing.T) {
			prefix := newPrefix()
			dir := prefix + "/jobs"
			f := foreignNode(t, admin, dir, c.foreign)
			s := newSession(t, conn, recipe.WithPrefix(prefix))
			take, err := c.take(s, "jobs")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancelCause(testCtx(t))
			done := make(chan error, 1)
			go func() { done <- take(ctx) }()
			waitChildren(t, admin, dir, 2, func(string) bool { return true }) // the foreign entry and ours
			stop := errors.New("the caller gave up")
			cancel(stop)
			if err := recv(t, done, "the cancelled acquisition"); !errors.Is(err, stop) {
				t.Fatalf("cancelled behind %s: %v, want the ctx's cause", f, err)
			}
			if err := admin.Delete(f, -1); err != nil {
				t.Fatal(err)
			}
			noEphemerals(t, admin, dir)
		})
	}
}

func mutexTake(c distlock.Compat) func(s recipe.Backend, name string) (func(ctx context.Context) error, error) {
	return func(s recipe.Backend, name string) (func(ctx context.Context) error, error) {
		m, err := recipe.NewMutex(s, name, distlock.WithCompat(c))
		return func(ctx context.Context) error { _, err := m.Lock(ctx); return err }, err
	}
}
