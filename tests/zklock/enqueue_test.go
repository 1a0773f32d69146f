package zklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
)

// TestEnqueueThroughFaultyServer is etcdlock's TestEnqueueThroughFaultyMember
// on a real 3-server ensemble: a caller tries to Lock a held lock, and
// TryLock a free one, with deadlines shorter than its server takes to
// answer, the server being slow (every chunk of bytes to and from it held
// 300 ms) or its replies to this client held (the creates are applied, the
// answers never come, until the client gives up on the connection and
// reconnects). Once the fault is over and the caller's cleanup, which
// waits for each create's outcome, has settled, only the holder's entry is
// left, and a third client acquires when the holder releases.
func TestEnqueueThroughFaultyServer(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	// The caller talks to server 0, which the fault hits; the holder and
	// the third client to the others, which it does not.
	hconn, hev := connect(t, ens, 1)
	drain(hev)
	tconn, tev := connect(t, ens, 2)
	drain(tev)
	for _, fault := range []string{"slow", "replies-held"} {
		t.Run(fault, func(t *testing.T) {
			prefix := newPrefix()
			hs := newSession(t, hconn, recipe.WithPrefix(prefix))
			holder := mustLock(t, newMutex(t, hs, "held"))
			conn, ev := connect(t, ens, 0)
			drain(ev)
			cs := newSession(t, conn, recipe.WithPrefix(prefix))
			caller, tryer := newMutex(t, cs, "held"), newMutex(t, cs, "free")

			const tries = 15
			heal := func() {}
			switch fault {
			case "slow":
				const server = 0
				ens.Network().Set(ens.Servers[server].Name, integration.Fault{Delay: 300 * time.Millisecond})
				heal = func() { ens.Network().Clear(ens.Servers[server].Name) }
			case "replies-held":
				release, err := ens.HoldReplies(conn)
				if err != nil {
					t.Fatal(err)
				}
				heal = release
			}
			wrong, expired := 0, 0
			for i := range tries {
				d := time.Duration(20+13*i) * time.Millisecond
				dctx, cancel := context.WithTimeout(context.Background(), d)
				_, lerr := caller.Lock(dctx)
				cancel()
				dctx, cancel = context.WithTimeout(context.Background(), d)
				l, terr := tryer.TryLock(dctx)
				cancel()
				if terr == nil {
					uctx, cancel := context.WithTimeout(context.Background(), time.Second)
					l.Unlock(uctx)
					cancel()
				}
				if errors.Is(terr, distlock.ErrLocked) {
					terr = nil // an earlier TryLock's release still on its way
				}
				for _, err := range []error{lerr, terr} {
					// The fault may also end the caller's Session on
					// its client-side deadline while the connection
					// keeps the ZooKeeper session (and its nodes): one
					// more way for the cleanup to be tested.
					if errors.Is(err, distlock.ErrSessionExpired) {
						expired++
						continue
					}
					if err != nil && !errors.Is(err, context.DeadlineExceeded) {
						wrong++
						t.Logf("deadline %v: %v", d, err)
					}
				}
			}
			heal()

			start := time.Now()
			left := append(waitEntriesAtMost(t, admin, prefix+"/held", 1, 30*time.Second)[1:], waitEntriesAtMost(t, admin, prefix+"/free", 0, 30*time.Second)...)
			t.Logf("%d Lock and %d TryLock tries through a faulty server (%s): %d failed as the Session had ended, %d errors matching neither DeadlineExceeded nor that, %d entries left behind (cleanup settled in %v)",
				tries, tries, fault, expired, wrong, len(left), time.Since(start).Round(time.Millisecond))
			if wrong > 0 {
				t.Errorf("%d errors did not match context.DeadlineExceeded", wrong)
			}
			if len(left) > 0 {
				t.Errorf("entries left behind: %v", left)
			}
			mustUnlock(t, holder)
			third := newSession(t, tconn, recipe.WithPrefix(prefix))
			actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, name := range []string{"held", "free"} {
				l, err := newMutex(t, third, name).Lock(actx)
				if err != nil {
					t.Fatalf("a third client could not acquire %q after the holder released: %v", name, err)
				}
				mustUnlock(t, l)
			}
		})
	}
}
