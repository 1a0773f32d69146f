package zklock_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

func TestInspect(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	ctx := testCtx(t)
	prefix := newPrefix()

	if q, err := mustAdmin(t, admin, prefix).Inspect(ctx, "inspect"); err != nil || len(q) != 0 {
		t.Fatalf("free lock: %v, %v; want no entries", q, err)
	}
	if _, err := zklock.NewAdmin(nil, prefix); !errors.Is(err, distlock.ErrNilClient) {
		t.Errorf("nil conn: %v, want ErrNilClient", err)
	}
	if _, err := zklock.NewAdmin(admin, "relative/"); err == nil {
		t.Error("a prefix that is not an absolute path: no error")
	}
	if _, err := mustAdmin(t, admin, prefix).Inspect(ctx, "a@1"); !errors.Is(err, distlock.ErrInvalidName) {
		t.Errorf("bad name: %v, want ErrInvalidName", err)
	}

	holders := []string{"holder-A", "waiter-B", "waiter-C"}
	var sessions []*zklock.Session
	var conns []*zk.Conn
	for i, h := range holders {
		conn, events := connect(t, ens, i)
		drain(events)
		conns = append(conns, conn)
		sessions = append(sessions, newSession(t, conn, recipe.WithPrefix(prefix), recipe.WithHolder(h)))
	}
	dir := prefix + "/inspect"
	lease := mustLock(t, newMutex(t, sessions[0], "inspect"))
	var waiting []<-chan result
	for i, s := range sessions[1:] {
		waiting = append(waiting, lockAsync(ctx, newMutex(t, s, "inspect")))
		waitEntries(t, admin, dir, i+2)
	}
	// Foreign children: not entries, and a sub-lock's directory.
	for _, c := range []string{"/other", "/@x", "/sub"} {
		if _, err := admin.Create(dir+c, []byte("foreign"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}

	// Another connection's view, right after the writes (Inspect syncs).
	q, err := mustAdmin(t, conns[2], prefix).Inspect(ctx, "inspect")
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 3 {
		t.Fatalf("got %d entries, want 3: %+v", len(q), q)
	}
	for i, e := range q {
		if e.Holder != holders[i] || e.Kind != distlock.Exclusive || e.Token.Name != "inspect" || e.Created.IsZero() {
			t.Errorf("entry %d: %+v, want holder %q, exclusive, a creation time", i, e, holders[i])
		}
		if want := strconv.FormatInt(conns[i].SessionID(), 16); e.Owner != want {
			t.Errorf("entry %d: owner %s, want session %s", i, e.Owner, want)
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

	mustUnlock(t, lease)
	next := recv(t, waiting[0], "B after A")
	if next.Err != nil {
		t.Fatal(next.Err)
	}
	q, err = mustAdmin(t, admin, prefix).Inspect(ctx, "inspect")
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 2 || q[0].Token != next.Lease.Token() || q[0].Holder != "waiter-B" || q[1].Holder != "waiter-C" {
		t.Fatalf("after the handoff: %+v, want B (token %v) then C", q, next.Lease.Token())
	}
	mustUnlock(t, next.Lease)
	last := recv(t, waiting[1], "C after B")
	if last.Err != nil {
		t.Fatal(last.Err)
	}
	mustUnlock(t, last.Lease)
	if q, err := mustAdmin(t, admin, prefix).Inspect(ctx, "inspect"); err != nil || len(q) != 0 {
		t.Fatalf("after all released: %+v, %v; want no entries", q, err)
	}
}

// TestInspectCandidatesAndMulti: an election's candidates carry their
// priorities and are listed after the lock's entries in the order they
// lead; a multi-lock's entries carry no names (ZooKeeper cannot find the
// others), only the Token they share.
func TestInspectCandidatesAndMulti(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	conn, events := connect(t, ens)
	drain(events)
	ctx := testCtx(t)
	prefix := newPrefix()
	admin := mustAdmin(t, conn, prefix)
	s := newSession(t, conn, recipe.WithPrefix(prefix))

	m, err := recipe.NewMultiMutex(s, "im/b", "im/a")
	if err != nil {
		t.Fatal(err)
	}
	ml := mustLock(t, m)
	var toks []distlock.Token
	for _, name := range []string{"im/a", "im/b"} {
		q, err := admin.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(q) != 1 || q[0].Multi != nil || q[0].Position != 1 {
			t.Fatalf("%s: %+v, want one entry at position 1, no Multi", name, q)
		}
		toks = append(toks, q[0].Token)
	}
	if toks[0].Seq != toks[1].Seq || toks[0].Owner != toks[1].Owner {
		t.Errorf("a multi-lock's tokens %v, %v: want one Seq and Owner", toks[0], toks[1])
	}
	mustUnlock(t, ml)

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

// mustAdmin returns the Admin of conn's locks under prefix.
func mustAdmin(t *testing.T, conn *zk.Conn, prefix string) *recipe.Admin {
	t.Helper()
	a, err := zklock.NewAdmin(conn, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
