package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration"
)

// TestHolderMemberCutOff runs on real etcd processes from the integration
// harness and cuts the member the holder talks to off from everything —
// its clients and its peers — without resetting a connection. Whether that
// member is a follower or the leader, the holder must hear that it lost
// the lock before the successor's Lock returns.
func TestHolderMemberCutOff(t *testing.T) {
	for _, role := range []string{"follower", "leader"} {
		t.Run(role, func(t *testing.T) {
			c := integration.NewEtcd(t)
			ctx := testCtx(t)
			lead, err := c.Leader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			h, w := (lead+1)%3, (lead+2)%3
			if role == "leader" {
				h = lead
			}
			hcli, err := c.Client(h)
			if err != nil {
				t.Fatal(err)
			}
			wcli, err := c.Client(w)
			if err != nil {
				t.Fatal(err)
			}
			hm := newMutex(t, newSession(t, hcli, etcdlock.WithTTL(etcdlock.MinTTL)), "cut")
			holder := mustLock(t, hm)
			qw := watchQueue(t, wcli, "cut")
			res := lockAsync(ctx, newMutex(t, newSession(t, wcli), "cut"))
			qw.nextPut()

			succ := holderHearsFirst(t, holder, res, func() { c.Cut(h) }, func() { c.Heal(h) })
			mustUnlock(t, succ)
		})
	}
}

// TestEnqueueThroughSlowMember runs on real etcd processes and slows one
// follower's traffic down (every chunk of bytes to and from it held
// 300 ms), while a caller whose client knows all three members tries to
// Lock, and TryLock a free lock, with deadlines shorter than that. The
// client spreads its requests over the members: an enqueue sent to the
// slow one reaches the leader long after the caller gave up, and its
// cleanup, sent to another member, is applied first. The late put must
// not bring the key back: once the fault is healed and the caller's
// background cleanup has settled, only the holder's entry is left, and a
// third client acquires when the holder releases.
func TestEnqueueThroughSlowMember(t *testing.T) {
	c := integration.NewEtcd(t)
	ctx := testCtx(t)
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slow, other := (lead+1)%3, (lead+2)%3
	hcli, err := c.Client(lead)
	if err != nil {
		t.Fatal(err)
	}
	all, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	ocli, err := c.Client(other)
	if err != nil {
		t.Fatal(err)
	}
	holder := mustLock(t, newMutex(t, newSession(t, hcli), "slow"))
	cs := newSession(t, all)
	caller, free := newMutex(t, cs, "slow"), newMutex(t, cs, "slow-free")
	third := newSession(t, ocli)

	const tries = 30
	c.Network().Set(c.Members[slow].Name, integration.Fault{Delay: 300 * time.Millisecond})
	wrong := 0
	for i := range tries {
		d := time.Duration(20+10*(i%20)) * time.Millisecond
		dctx, cancel := context.WithTimeout(context.Background(), d)
		_, lerr := caller.Lock(dctx)
		cancel()
		dctx, cancel = context.WithTimeout(context.Background(), d)
		l, terr := free.TryLock(dctx)
		cancel()
		if terr == nil {
			mustUnlock(t, l)
		}
		for _, err := range []error{lerr, terr} {
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				wrong++
				t.Logf("deadline %v: %v", d, err)
			}
		}
	}
	c.Network().Clear(c.Members[slow].Name)

	start := time.Now()
	var left []string
	for {
		left = append(queueKeys(t, hcli, "slow")[1:], queueKeys(t, hcli, "slow-free")...)
		if len(left) == 0 || time.Since(start) > 30*time.Second {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("%d Lock and %d TryLock tries through a slow member: %d errors not matching DeadlineExceeded, %d entries left behind (cleanup settled in %v)",
		tries, tries, wrong, len(left), time.Since(start).Round(time.Millisecond))
	if wrong > 0 {
		t.Errorf("%d errors did not match context.DeadlineExceeded", wrong)
	}
	if len(left) > 0 {
		t.Errorf("entries left behind: %v", left)
	}
	mustUnlock(t, holder)
	actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range []string{"slow", "slow-free"} {
		l, err := newMutex(t, third, name).Lock(actx)
		if err != nil {
			t.Fatalf("a third client could not acquire %q after the holder released: %v", name, err)
		}
		mustUnlock(t, l)
	}
}
