package etcdlock_test

import (
	"testing"
	"time"

	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/locktest"
)

// TestFrozenWaiter runs locktest.FrozenWaiter on real etcd processes: a
// waiting child (a Mutex's Lock; an Election's Campaign, handed the term
// by Resign or by HandOff to its value) stopped with SIGSTOP while its
// predecessor releases, and continued after its session's client-side
// deadline (TTL 2 s, less the margin of a fifth) but before the lease can
// expire on the server (no sooner than 400 ms later), at 5%, 30%, 55% and
// 80% of that window: its Lock or Campaign fails with ErrSessionExpired,
// nothing of it is left, and the waiter behind it acquires.
//
// It makes locktest.DefaultFreezeTries (3) tries of each case and offset
// (about 20 s; the full sweep about 2 minutes, four at a time); DISTLOCK_FREEZE_TRIES=20
// (locktest.FreezeTriesEnv) runs the full sweep.
func TestFrozenWaiter(t *testing.T) {
	c := integration.NewEtcd(t)
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	admin, err := etcdlock.NewAdmin(cli, etcdlock.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = etcdlock.MinTTL
	locktest.FrozenWaiter(t, locktest.FreezeStore{
		Holder: integration.HolderSpec{Backend: "etcd", Endpoints: c.Endpoints(), TTL: ttl},
		Margin: ttl / 5,
		NewSession: func(t *testing.T) locktest.Session {
			return &etcdSession{s: newSession(t, cli, etcdlock.WithTTL(10*time.Second)), admin: cli}
		},
		Queue: admin,
	})
}
