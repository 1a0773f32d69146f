package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration/locktest"
	"github.com/distlock/distlock/recipe"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func newElection(t *testing.T, s *etcdlock.Session, name string) *recipe.Election {
	t.Helper()
	e, err := recipe.NewElection(s, name)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func wantLeader(t *testing.T, e *recipe.Election, value string, token distlock.Token) {
	t.Helper()
	info, err := e.Leader(testCtx(t))
	if err != nil {
		t.Fatalf("Leader: %v", err)
	}
	if info.Value != value || info.Token != token {
		t.Fatalf("Leader = %q %v, want %q %v", info.Value, info.Token, value, token)
	}
}

// nextInfo receives the next leader change from an Observe channel.
func nextInfo(t *testing.T, ch <-chan distlock.LeaderInfo, what string) distlock.LeaderInfo {
	t.Helper()
	select {
	case info, ok := <-ch:
		if !ok {
			t.Fatalf("%s: Observe channel closed", what)
		}
		return info
	case <-time.After(testTimeout):
		t.Fatalf("%s: timed out", what)
	}
	panic("unreachable")
}

func TestElectionBadInput(t *testing.T) {
	clus := newCluster(t)
	if _, err := recipe.NewElection(nil, "x"); !errors.Is(err, distlock.ErrNilClient) {
		t.Fatalf("nil session: %v", err)
	}
	if _, err := recipe.NewElection(newSession(t, clus.Client(0)), "a/@b"); err == nil {
		t.Fatal("invalid name accepted")
	}
}

// Proclaim races the leader's own watch on its entry: whether the deposed
// leader has noticed yet or not, the guarded Txn refuses to write.
func TestElectionProclaimDeposed(t *testing.T) {
	clus := newCluster(t)
	cli := clus.Client(0)
	e := newElection(t, newSession(t, newClient(t, clus, 1)), "proclaim")
	l := locktest.MustCampaign(t, e, "v1")
	if err := l.Proclaim(testCtx(t), "v2"); err != nil {
		t.Fatal(err)
	}
	wantLeader(t, e, "v2", l.Token())
	keys := queueKeys(t, cli, "proclaim")
	if _, err := cli.Delete(testCtx(t), keys[0]); err != nil {
		t.Fatal(err)
	}
	if err := l.Proclaim(testCtx(t), "v3"); !errors.Is(err, distlock.ErrNotLeader) {
		t.Fatalf("Proclaim after the entry was deleted: %v, want ErrNotLeader", err)
	}
	if keys := queueKeys(t, cli, "proclaim"); len(keys) != 0 {
		t.Fatalf("Proclaim re-created the entry: %v", keys)
	}
	recv(t, l.Done(), "Done after the entry was deleted")
}

// Observe keeps going, and misses nothing, when the revisions its watch
// would resume from are compacted away while a leader hands over. (The
// order of changes, "no leader" included, is in the contract suite.)
func TestElectionObserveCompaction(t *testing.T) {
	clus := newCluster(t)
	cli := clus.Client(0)
	eb := newElection(t, newSession(t, newClient(t, clus, 2)), "observe")
	ec := newElection(t, newSession(t, newClient(t, clus, 0)), "observe")
	octx, ocancel := context.WithCancel(testCtx(t))
	ch := newElection(t, newSession(t, cli), "observe").Observe(octx)
	want := func(what, value string, tok distlock.Token) {
		t.Helper()
		info := nextInfo(t, ch, what)
		if info.Value != value || info.Token != tok {
			t.Fatalf("%s: observed %q %v, want %q %v", what, info.Value, info.Token, value, tok)
		}
	}
	want("initial", "", distlock.Token{})

	qw := watchQueue(t, cli, "observe")
	b := locktest.MustCampaign(t, eb, "b")
	want("b leads", "b", b.Token())
	qw.nextPut() // b's
	cres := locktest.CampaignAsync(testCtx(t), ec, "c")
	qw.nextPut()

	// Compact everything so far: Observe keeps going.
	resp, err := cli.Put(testCtx(t), "/other", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(testCtx(t), resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	if err := b.Resign(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	c := recv(t, cres, "c after b resigned")
	if c.Err != nil {
		t.Fatal(c.Err)
	}
	want("b resigned into c (no gap)", "c", c.Leadership.Token())
	if err := c.Leadership.Resign(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	want("c resigned", "", distlock.Token{})

	ocancel()
	for range ch {
	}
}

// Observe survives the failure of the member its client talks to.
func TestElectionObserveMemberFailure(t *testing.T) {
	clus := newCluster(t)
	// The observer's member is a follower: stopping the raft leader would
	// stall the writes below for an election.
	lead := clus.WaitLeader(t)
	down := (lead + 1) % 3
	cli := newClient(t, clus, lead)
	e := newElection(t, newSession(t, cli), "member")
	octx, ocancel := context.WithCancel(testCtx(t))
	defer ocancel()
	ch := newElection(t, newSession(t, newClient(t, clus, down)), "member").Observe(octx)
	if info := nextInfo(t, ch, "initial"); !info.NoLeader() {
		t.Fatalf("initial: %+v", info)
	}
	// While the observer's member is down, the leader changes and the
	// revisions the observer's watch would resume from are compacted away.
	clus.Members[down].Stop(t)
	l := locktest.MustCampaign(t, e, "a")
	if err := l.Proclaim(testCtx(t), "a2"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Put(testCtx(t), "/other", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(testCtx(t), resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	clus.Members[down].Restart(t)
	// The intermediate value may or may not be seen (it was compacted); the
	// current one must be.
	info := nextInfo(t, ch, "leader after the member came back")
	if info.Value == "a" && info.Token == l.Token() {
		info = nextInfo(t, ch, "proclaimed value")
	}
	if info.Value != "a2" || info.Token != l.Token() {
		t.Fatalf("observed %+v, want a2 %v", info, l.Token())
	}
	if err := l.Resign(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if info := nextInfo(t, ch, "no leader"); !info.NoLeader() {
		t.Fatalf("observed %+v, want no leader", info)
	}
}

// No phantom leaders: a waiting candidate whose entry is deleted just
// before its predecessor resigns fails its Campaign, however its watches
// interleave, instead of returning a leadership it does not have.
func TestElectionNoPhantomLeader(t *testing.T) {
	clus := newCluster(t)
	cli := clus.Client(0)
	ea := newElection(t, newSession(t, newClient(t, clus, 1)), "phantom")
	eb := newElection(t, newSession(t, newClient(t, clus, 2)), "phantom")
	for i := range 5 {
		qw := watchQueue(t, cli, "phantom")
		a := locktest.MustCampaign(t, ea, "a")
		qw.nextPut() // a's
		bres := locktest.CampaignAsync(testCtx(t), eb, "b")
		bkey := qw.nextPut()
		if _, err := cli.Delete(testCtx(t), bkey); err != nil {
			t.Fatal(err)
		}
		if err := a.Resign(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		b := recv(t, bres, "b's campaign")
		if b.Err == nil {
			t.Fatalf("round %d: b returned leadership %v though its entry was deleted", i, b.Leadership.Token())
		}
		if !errors.Is(b.Err, distlock.ErrEntryGone) {
			t.Fatalf("round %d: b's campaign: %v, want ErrEntryGone", i, b.Err)
		}
		if keys := queueKeys(t, cli, "phantom"); len(keys) != 0 {
			t.Fatalf("round %d: entries left: %v", i, keys)
		}
	}
}
