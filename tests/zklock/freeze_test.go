package zklock_test

import (
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/locktest"
	"github.com/distlock/distlock/zklock"
)

// TestFrozenWaiter runs locktest.FrozenWaiter on a real ensemble: a
// waiting child (a Mutex's Lock; an Election's Campaign, handed the term
// by Resign or by HandOff to its value) stopped with SIGSTOP while its
// predecessor releases, and continued after its session's client-side
// deadline (a session timeout of 3 s less the margin, here the floor of
// an eighth: the servers tick every 200 ms) but before the servers can
// expire the session (no sooner than 375 ms later), at 5%, 30%, 55% and
// 80% of that window: its Lock or Campaign fails with ErrSessionExpired,
// nothing of it is left, and the waiter behind it acquires.
//
// It makes locktest.DefaultFreezeTries (3) tries of each case and offset
// (about 30 s; the full sweep about 3 minutes, four at a time); DISTLOCK_FREEZE_TRIES=20
// (locktest.FreezeTriesEnv) runs the full sweep.
func TestFrozenWaiter(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	conn, events := connect(t, ens)
	drain(events)
	b := newBackend(t, ens, conn)
	admin, err := zklock.NewAdmin(conn, b.prefix)
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 3 * time.Second
	locktest.FrozenWaiter(t, locktest.FreezeStore{
		Holder:     integration.HolderSpec{Backend: "zk", Endpoints: ens.Addrs(), Prefix: b.prefix, TTL: timeout},
		Margin:     timeout / 8,
		NewSession: b.Session,
		Queue:      admin,
	})
}
