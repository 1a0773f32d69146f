package zklock_test

import (
	"errors"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"github.com/go-zookeeper/zk"
)

// TestCompatLatchRelease: Curator's LeaderLatch watches the candidate
// ahead of it with a data watch and acts on its deletion only, so a
// leader in CompatCuratorLatch ends with a plain delete (the watch's one
// event is the deletion) and refuses a Proclaim, whose data change would
// spend that watch.
func TestCompatLatchRelease(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	conn, cevents := connect(t, ens, 0)
	drain(cevents)
	prefix := newPrefix()
	s := newSession(t, conn, recipe.WithPrefix(prefix))
	e, err := recipe.NewElection(s, "latch", distlock.WithElectionCompat(distlock.CompatCuratorLatch))
	if err != nil {
		t.Fatal(err)
	}
	l, err := e.Campaign(testCtx(t), "ours")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Proclaim(testCtx(t), "new"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Proclaim: %v, want errors.ErrUnsupported", err)
	}
	kids, _, err := admin.Children(prefix + "/latch")
	if err != nil || len(kids) != 1 {
		t.Fatalf("children %v, %v; want the leader's node", kids, err)
	}
	// The watch a LeaderLatch behind the leader would set.
	_, _, ch, err := admin.GetW(prefix + "/latch/" + kids[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Resign(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if ev := recv(t, ch, "the leader's node's event"); ev.Type != zk.EventNodeDeleted {
		t.Fatalf("the leader's resign fired %v on a data watch, want %v: a LeaderLatch would miss its going", ev.Type, zk.EventNodeDeleted)
	}
	noEphemerals(t, admin, prefix+"/latch")
}
