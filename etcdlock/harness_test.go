package etcdlock_test

import (
	"testing"

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

			succ := holderHearsFirst(t, holder, res, func() {
				if err := c.Cut(h); err != nil {
					t.Error(err)
				}
			}, func() { c.Heal(h) })
			mustUnlock(t, succ)
		})
	}
}
