package zklock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"github.com/go-zookeeper/zk"
)

// Revoke leaves another client's holder alone unless its client is named
// (RevokeRequest.Clients, forced): then the holder's node is deleted and
// the distlock waiter behind it gets the lock.
func TestRevokeForeignHolder(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	prefix := newPrefix()
	dir := prefix + "/jobs"
	zconn, zevents := connect(t, ens, 1)
	drain(zevents)
	zl := zk.NewLock(zconn, dir, zk.WorldACL(zk.PermAll))
	if err := zl.Lock(); err != nil {
		t.Fatal(err)
	}
	conn, cevents := connect(t, ens, 0)
	drain(cevents)
	s := newSession(t, conn, recipe.WithPrefix(prefix))
	res := lockAsync(testCtx(t), newMutex(t, s, "jobs"))
	waitEntries(t, admin, dir, 1)
	a := mustAdmin(t, admin, prefix)

	if _, err := a.Revoke(testCtx(t), "jobs", distlock.RevokeRequest{Reason: "test", Clients: []string{distlock.ClientGoZookeeper}}); !errors.Is(err, distlock.ErrInvalidRevoke) {
		t.Fatalf("Revoke of a foreign client without Force: %v, want ErrInvalidRevoke", err)
	}
	rvs, err := a.Revoke(testCtx(t), "jobs", distlock.RevokeRequest{Reason: "test", Force: true})
	if err != nil || len(rvs) != 0 {
		t.Fatalf("Revoke without Clients: %v, %+v; want nothing revoked (zk.Lock's holder left alone)", err, rvs)
	}
	notAcquired(t, "after a revoke that leaves zk.Lock alone", 200*time.Millisecond, res)

	rvs, err = a.Revoke(testCtx(t), "jobs", distlock.RevokeRequest{Reason: "test", Force: true, Clients: []string{distlock.ClientGoZookeeper}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rvs) != 1 || rvs[0].Outcome != distlock.RevokeForced {
		t.Fatalf("Revoke with Clients: %+v; want zk.Lock's holder forced", rvs)
	}
	r := recv(t, res, "the lock after zk.Lock's holder was forced out")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	mustUnlock(t, r.Lease)
	// zk.Lock's Unlock of a node deleted under it fails: its holder was
	// never told.
	if err := zl.Unlock(); !errors.Is(err, zk.ErrNoNode) {
		t.Logf("zk.Lock Unlock after the forced revoke: %v", err)
	}
	noEphemerals(t, admin, dir)
}
