package etcdlock_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/recipe"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestEntryDeletedWhileHeld(t *testing.T) {
	clus := newCluster(t)
	cli := clus.Client(0)
	holder := mustLock(t, newMutex(t, newSession(t, cli), "deleted"))
	keys := queueKeys(t, cli, "deleted")
	if _, err := cli.Delete(testCtx(t), keys[0]); err != nil {
		t.Fatal(err)
	}
	recv(t, holder.Done(), "holder's Done")
	if err := holder.Err(); !errors.Is(err, distlock.ErrEntryGone) || !errors.Is(err, distlock.ErrLost) {
		t.Fatalf("Err: %v, want ErrLost and ErrEntryGone", err)
	}
}

func TestCompactionWhileWaiting(t *testing.T) {
	clus := newCluster(t)
	cli := clus.Client(0)
	holder := mustLock(t, newMutex(t, newSession(t, cli), "compact"))
	qw := watchQueue(t, cli, "compact")
	res := lockAsync(testCtx(t), newMutex(t, newSession(t, newClient(t, clus, 1)), "compact"))
	qw.nextPut()

	var rev int64
	for i := range 20 {
		resp, err := cli.Put(testCtx(t), fmt.Sprintf("/other/%d", i), "x")
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	if _, err := cli.Compact(testCtx(t), rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	mustUnlock(t, holder)
	r := recv(t, res, "waiter after compaction")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	// The new holder still notices its entry going after the compaction.
	keys := queueKeys(t, cli, "compact")
	if _, err := cli.Delete(testCtx(t), keys[0]); err != nil {
		t.Fatal(err)
	}
	recv(t, r.Lease.Done(), "Done after compaction")
}

func TestBadInput(t *testing.T) {
	clus := newCluster(t)
	ctx := testCtx(t)
	if _, err := etcdlock.NewSession(ctx, nil); !errors.Is(err, distlock.ErrNilClient) {
		t.Fatalf("nil client: %v", err)
	}
	if _, err := recipe.NewMutex(nil, "x"); !errors.Is(err, distlock.ErrNilClient) {
		t.Fatalf("nil session: %v", err)
	}
	if _, err := etcdlock.NewSession(ctx, clus.Client(0), etcdlock.WithTTL(time.Second)); !errors.Is(err, distlock.ErrTTLTooShort) {
		t.Fatalf("1s TTL: %v", err)
	}
	// Invalid lock names are in the contract suite.
}
