package etcdlock_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/recipe"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestInspect(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)

	admin := mustAdmin(t, cli)
	if q, err := admin.Inspect(ctx, "inspect"); err != nil || len(q) != 0 {
		t.Fatalf("free lock: %v, %v; want no entries", q, err)
	}
	if _, err := etcdlock.NewAdmin(nil, ""); !errors.Is(err, distlock.ErrNilClient) {
		t.Errorf("nil client: %v, want ErrNilClient", err)
	}
	if _, err := admin.Inspect(ctx, "a@1"); !errors.Is(err, distlock.ErrInvalidName) {
		t.Errorf("bad name: %v, want ErrInvalidName", err)
	}

	holders := []string{"holder-A", "waiter-B", "waiter-C"}
	var sessions []*etcdlock.Session
	for i, h := range holders {
		sessions = append(sessions, newSession(t, newClient(t, clus, i), recipe.WithHolder(h)))
	}
	w := watchQueue(t, cli, "inspect")
	lease := mustLock(t, newMutex(t, sessions[0], "inspect"))
	w.nextPut()
	var waiting []<-chan result
	for _, s := range sessions[1:] {
		waiting = append(waiting, lockAsync(ctx, newMutex(t, s, "inspect")))
		w.nextPut()
	}
	// Foreign keys: not entries of "inspect", or not entries at all. A
	// key of no known client beside the queue is listed last, at no
	// position.
	for _, k := range []string{"/distlock/inspect/@x", "/distlock/inspect/@w_", "/distlock/inspect/sub/@w1_1", "/distlock/inspect/other"} {
		if _, err := cli.Put(ctx, k, "foreign"); err != nil {
			t.Fatal(err)
		}
	}

	q, err := mustAdmin(t, cli, etcdlock.DefaultPrefix).Inspect(ctx, "inspect")
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 4 {
		t.Fatalf("got %d entries, want 4: %+v", len(q), q)
	}
	if u := q[3]; u.Key != "/distlock/inspect/other" || u.Client != distlock.ClientUnknown || u.Position != 0 || u.Holding {
		t.Errorf("unknown key listed as %+v", u)
	}
	q = q[:3]
	if _, err := cli.Delete(ctx, "/distlock/inspect/other"); err != nil {
		t.Fatal(err)
	}
	for i, e := range q {
		if e.Holder != holders[i] || e.Kind != distlock.Exclusive || e.Token.Name != "inspect" || !e.Created.IsZero() {
			t.Errorf("entry %d: %+v, want holder %q, exclusive, no creation time", i, e, holders[i])
		}
		if want := strconv.FormatInt(int64(sessions[i].ID()), 16); e.Owner != want {
			t.Errorf("entry %d: owner %s, want lease %s", i, e.Owner, want)
		}
		if i > 0 && e.Token.Seq <= q[i-1].Token.Seq {
			t.Errorf("entry %d: token %v not after %v", i, e.Token, q[i-1].Token)
		}
		if e.Position != i+1 || e.Multi != nil || e.Priority != 0 {
			t.Errorf("entry %d: position %d, multi %v, priority %d; want %d, none, 0", i, e.Position, e.Multi, e.Priority, i+1)
		}
	}
	if q[0].Token != lease.Token() {
		t.Errorf("first entry's token %v, holder's %v", q[0].Token, lease.Token())
	}
	if !q[0].Holding || q[1].Holding || q[2].Holding {
		t.Errorf("Holding = %v %v %v, want only the first", q[0].Holding, q[1].Holding, q[2].Holding)
	}

	// The next holder is listed first once the holder goes.
	mustUnlock(t, lease)
	next := successor(t, waiting[0], lease.Token(), "B after A")
	q, err = admin.Inspect(ctx, "inspect")
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 2 || q[0].Token != next.Token() || q[0].Holder != "waiter-B" || q[1].Holder != "waiter-C" {
		t.Fatalf("after the handoff: %+v, want B (token %v) then C", q, next.Token())
	}
	mustUnlock(t, next)
	mustUnlock(t, successor(t, waiting[1], next.Token(), "C after B"))

	// A cut-off client fails rather than reporting a free lock.
	dead, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := admin.Inspect(dead, "inspect"); err == nil {
		t.Error("Inspect with a cancelled context succeeded")
	}
}

// TestInspectCandidatesAndMulti: an election's candidates carry their
// priorities and are listed after the lock's entries in the order they
// lead; a multi-lock's entries name all its locks.
func TestInspectCandidatesAndMulti(t *testing.T) {
	clus := newCluster(t)
	cli := newClient(t, clus, 0)
	ctx := testCtx(t)
	admin := mustAdmin(t, cli)
	s := newSession(t, cli)

	m, err := recipe.NewMultiMutex(s, "im/b", "im/a")
	if err != nil {
		t.Fatal(err)
	}
	ml := mustLock(t, m)
	plain := mustLock(t, newMutex(t, s, "im/c"))
	for name, want := range map[string][]string{"im/a": {"im/a", "im/b"}, "im/b": {"im/a", "im/b"}, "im/c": nil} {
		q, err := admin.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(q) != 1 || !slices.Equal(q[0].Multi, want) || q[0].Position != 1 {
			t.Errorf("%s: %+v, want one entry at position 1 with Multi %v", name, q, want)
		}
	}
	mustUnlock(t, ml)
	mustUnlock(t, plain)

	// A lock entry and, of the same name, a leader of priority 9 and
	// candidates of priorities 3 and 5, in that order of arrival.
	lock := mustLock(t, newMutex(t, s, "im/e"))
	defer mustUnlock(t, lock)
	e, err := recipe.NewElection(s, "im/e")
	if err != nil {
		t.Fatal(err)
	}
	lead, err := e.Campaign(ctx, "c9", distlock.WithPriority(9))
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Resign(context.Background())
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i, p := range []int{3, 5} {
		go e.Campaign(cctx, "c"+strconv.Itoa(p), distlock.WithPriority(p))
		waitQueueLen(t, admin, "im/e", 3+i)
	}
	q, err := admin.Inspect(ctx, "im/e")
	if err != nil {
		t.Fatal(err)
	}
	type view struct {
		kind           distlock.Kind
		holder         string
		prio, position int
		holding        bool
	}
	var got []view
	for _, e := range q {
		got = append(got, view{e.Kind, e.Holder, e.Priority, e.Position, e.Holding})
	}
	want := []view{
		{distlock.Exclusive, "", 0, 1, true},
		{distlock.Candidate, "c9", 9, 1, true},
		{distlock.Candidate, "c5", 5, 2, false},
		{distlock.Candidate, "c3", 3, 3, false},
	}
	if len(got) > 0 {
		want[0].holder = got[0].holder // the session's default holder
	}
	if !slices.Equal(got, want) {
		t.Errorf("queue %+v, want %+v", got, want)
	}
}

// waitQueueLen waits, on admin's WatchQueue, until lock name's queue has
// n entries.
func waitQueueLen(t *testing.T, admin *recipe.Admin, name string, n int) {
	t.Helper()
	enough := errors.New("enough")
	err := admin.WatchQueue(testCtx(t), name, func(q []distlock.QueueEntry) error {
		if len(q) == n {
			return enough
		}
		return nil
	})
	if !errors.Is(err, enough) {
		t.Fatalf("waiting for %d entries of %s: %v", n, name, err)
	}
}

// mustAdmin returns the Admin of cli's locks under prefix (the first of
// prefix; DefaultPrefix if none).
func mustAdmin(t *testing.T, cli *clientv3.Client, prefix ...string) *recipe.Admin {
	t.Helper()
	a, err := etcdlock.NewAdmin(cli, append(prefix, "")[0])
	if err != nil {
		t.Fatal(err)
	}
	return a
}
