package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/integration"
)

// TestHolderPermit is the seed scenario with a semaphore's permit: a
// holder process takes a permit of two, another client the other one; the
// holder is stopped past its TTL (a GC pause); a waiter gets the stopped
// holder's slot with a newer token and writes through the slot's fence.
// When the holder wakes it is told it lost the permit, its late write
// with the old token is refused, and its late release touches nothing of
// the successor's.
func TestHolderPermit(t *testing.T) {
	for _, store := range []string{"etcd", "zk"} {
		t.Run(store, func(t *testing.T) {
			ctx := ctxFor(t, 2*time.Minute)
			spec, cli := holderEnv(ctx, t, store, "report", 0, 2)
			newSem := func() distlock.Locker { return semaphoreOn(ctx, t, cli, "report", 2) }
			a := integration.NewHolder(t, spec)
			t1 := a.Token()
			if !strings.HasPrefix(t1.Name, "report/slot-") { // distlock.SlotName's form
				t.Fatalf("the holder's token %v is not a slot's", t1)
			}
			pc, err := newSem().Lock(ctx)
			if err != nil {
				t.Fatalf("C's Acquire of the other permit: %v", err)
			}
			defer pc.Unlock(context.Background())
			if pc.Token().Name == t1.Name {
				t.Fatalf("C got the holder's slot %s", t1.Name)
			}
			fence, err := fencing.NewMemory(t1.Name)
			if err != nil {
				t.Fatal(err)
			}
			if err := fence.Admit(ctx, t1); err != nil {
				t.Fatalf("the holder's write before the pause: %v", err)
			}

			if err := a.Pause(); err != nil {
				t.Fatal(err)
			}
			paused := time.Now()
			actx, cancel := context.WithTimeout(ctx, time.Minute)
			pb, err := newSem().Lock(actx)
			cancel()
			if err != nil {
				t.Fatalf("B's Acquire while the holder is paused: %v", err)
			}
			t.Logf("B acquired %v after the holder was paused", time.Since(paused).Round(time.Millisecond))
			if pb.Token().Name != t1.Name || !pb.Token().Newer(t1) {
				t.Fatalf("B's token %v: want the holder's slot %s with a newer sequence than %v", pb.Token(), t1.Name, t1)
			}
			if s := procState(t, a.PID()); s != 'T' {
				t.Fatalf("the holder's state when B acquired: %c, want T (stopped)", s)
			}
			if err := fence.Admit(ctx, pb.Token()); err != nil {
				t.Fatalf("B's write through the slot's fence: %v", err)
			}

			if err := a.Resume(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-a.Lost():
			case <-time.After(30 * time.Second):
				t.Fatal("the holder was not told it lost its permit within 30s of waking up")
			}
			if err := fence.Admit(ctx, t1); !errors.Is(err, fencing.ErrStale) {
				t.Fatalf("the woken holder's late write: %v, want ErrStale", err)
			}
			if err := a.Unlock(ctx); !errors.Is(err, distlock.ErrLost) {
				t.Fatalf("the holder's late release: %v, want ErrLost", err)
			}
			select {
			case <-pb.Done():
				t.Fatalf("B's permit ended after the holder's late release: %v", pb.Err())
			default:
			}
			if err := pb.Unlock(ctx); err != nil {
				t.Fatalf("B's release: %v", err)
			}
		})
	}
}
