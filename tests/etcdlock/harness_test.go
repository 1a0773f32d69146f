package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"

	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	clientv3 "go.etcd.io/etcd/client/v3"
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

			succ := holderHearsFirst(t, holder, res, func() {
				if err := c.Cut(h); err != nil {
					t.Error(err)
				}
			}, func() { c.Heal(h) })
			mustUnlock(t, succ)
		})
	}
}

// TestEnqueueThroughFaultyMember runs on real etcd processes and makes
// one follower slow (every chunk of bytes to and from it held 300 ms), or
// cuts it off for the whole run (its bytes held, then delivered when it
// heals), while a caller whose client knows all three members tries to
// Lock, and TryLock a free lock, with deadlines shorter than that. The
// client spreads its requests over the members: an enqueue sent to the
// faulty one reaches the leader long after the caller gave up, and its
// cleanup, sent to another member, is applied first. The late put must
// not bring the key back: once the fault is healed and the caller's
// background cleanup has settled, only the holder's entry is left, and a
// third client acquires when the holder releases.
func TestEnqueueThroughFaultyMember(t *testing.T) {
	c := integration.NewEtcd(t)
	ctx := testCtx(t)
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	faulty, other := (lead+1)%3, (lead+2)%3
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
	hs, third := newSession(t, hcli), newSession(t, ocli)
	for _, f := range []struct {
		name  string
		fault integration.Fault
	}{
		{"slow", integration.Fault{Delay: 300 * time.Millisecond}},
		{"cut", integration.Fault{Hold: true}},
	} {
		t.Run(f.name, func(t *testing.T) {
			held, free := "faulty-"+f.name, "faulty-free-"+f.name
			holder := mustLock(t, newMutex(t, hs, held))
			// A session of its own, whose TTL outlasts the fault: a
			// keepalive stuck on the faulty member is another matter,
			// and this test is not about it.
			cs := newSession(t, all, etcdlock.WithTTL(2*time.Minute))
			caller, tryer := newMutex(t, cs, held), newMutex(t, cs, free)

			const tries = 15
			c.Network().Set(c.Members[faulty].Name, f.fault)
			wrong := 0
			for i := range tries {
				d := time.Duration(20+13*i) * time.Millisecond
				dctx, cancel := context.WithTimeout(context.Background(), d)
				_, lerr := caller.Lock(dctx)
				cancel()
				dctx, cancel = context.WithTimeout(context.Background(), d)
				l, terr := tryer.TryLock(dctx)
				cancel()
				if terr == nil {
					// Through the faulty member the release may not
					// go through in time: it then goes on in the
					// background, which the settling below waits for.
					uctx, cancel := context.WithTimeout(context.Background(), time.Second)
					l.Unlock(uctx)
					cancel()
				}
				// A TryLock may also find the lock held: by an earlier
				// TryLock's entry whose release is still on its way.
				// Entries that stay are what the check below counts.
				if errors.Is(terr, distlock.ErrLocked) {
					terr = nil
				}
				for _, err := range []error{lerr, terr} {
					if err != nil && !errors.Is(err, context.DeadlineExceeded) {
						wrong++
						t.Logf("deadline %v: %v", d, err)
					}
				}
			}
			c.Network().Clear(c.Members[faulty].Name)

			start := time.Now()
			left := append(waitQueueKeys(t, hcli, held, 1, 30*time.Second)[1:], waitQueueKeys(t, hcli, free, 0, 30*time.Second)...)
			t.Logf("%d Lock and %d TryLock tries through a %s member: %d errors not matching DeadlineExceeded, %d entries left behind (cleanup settled in %v)",
				tries, tries, f.name, wrong, len(left), time.Since(start).Round(time.Millisecond))
			if wrong > 0 {
				t.Errorf("%d errors did not match context.DeadlineExceeded", wrong)
			}
			if len(left) > 0 {
				t.Errorf("entries left behind: %v", left)
			}
			mustUnlock(t, holder)
			actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, name := range []string{held, free} {
				l, err := newMutex(t, third, name).Lock(actx)
				if err != nil {
					t.Fatalf("a third client could not acquire %q after the holder released: %v", name, err)
				}
				mustUnlock(t, l)
			}
		})
	}
}

// TestEnqueueAcrossLeaderLoss runs on real etcd processes, cuts the leader
// off and, at offsets swept across the election that follows, calls Lock
// through clients that know one follower each. An enqueue forwarded to the
// old leader is lost with it; its member answers, once the new leader is
// elected, with a server timeout ("possibly due to previous leader
// failure") — before the attempt's own bound when the session's TTL is
// the default. That says the member could not commit the Txn, not that
// the Lock failed: every Lock must succeed, and nothing but the held
// entries may be left.
func TestEnqueueAcrossLeaderLoss(t *testing.T) {
	c := integration.NewEtcd(t)
	ctx := testCtx(t)
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sessions []*etcdlock.Session
	var clis []*clientv3.Client
	log := debugLog(t, "lockers")
	for _, f := range []int{(lead + 1) % 3, (lead + 2) % 3} {
		cli, err := c.Client(f)
		if err != nil {
			t.Fatal(err)
		}
		clis = append(clis, cli)
		sessions = append(sessions, newSession(t, cli, recipe.WithLogger(log)))
	}
	// Both followers get every offset: the one that becomes leader
	// commits its own Txns at once, the other forwards them. One Lock in
	// four is a multi-lock's, whose one Txn puts two keys.
	var muts []distlock.Locker
	names := make([][]string, 16)
	for i := range names {
		name := fmt.Sprintf("leaderloss-%d", i)
		if i%4 != 3 {
			names[i] = []string{name}
			muts = append(muts, newMutex(t, sessions[i%2], name))
			continue
		}
		names[i] = []string{name, name + "-x"}
		m, err := recipe.NewMultiMutex(sessions[i%2], names[i]...)
		if err != nil {
			t.Fatal(err)
		}
		muts = append(muts, m)
	}
	c.Network().Set(c.Members[lead].Name, integration.Fault{Hold: true})
	defer c.Network().Clear(c.Members[lead].Name)
	type res struct {
		l   *distlock.Lease
		err error
	}
	results := make(chan res, len(muts))
	for i, m := range muts {
		go func() {
			// 0 to 1.4 s after the cut: before, during and after the
			// election (500 ms election timeout).
			time.Sleep(time.Duration(i/2) * 200 * time.Millisecond)
			lctx, cancel := context.WithTimeout(ctx, 45*time.Second)
			defer cancel()
			l, err := m.Lock(lctx)
			results <- res{l, err}
		}()
	}
	for range muts {
		r := <-results
		if r.err != nil {
			t.Errorf("Lock across the leader's loss: %v", r.err)
			continue
		}
		if r.l.Err() != nil {
			t.Errorf("Lock returned a lost lock: %v", r.l.Err())
		}
		defer mustUnlock(t, r.l)
	}
	c.Network().Clear(c.Members[lead].Name)
	for i := range muts {
		for _, name := range names[i] {
			if keys := waitQueueKeys(t, clis[i%2], name, 1, 30*time.Second); len(keys) != 1 {
				t.Errorf("lock %s: entries %v, want the holder's alone", name, keys)
			}
		}
	}
}
