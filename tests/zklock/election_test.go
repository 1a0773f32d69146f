package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/locktest"
	"github.com/distlock/distlock/recipe"
	"github.com/go-zookeeper/zk"
)

// candidates lists the election entries ("@e-…") in dir, oldest first, as
// the leader sees them.
func candidates(t *testing.T, conn *zk.Conn, dir string) []string {
	t.Helper()
	var out []string
	for _, c := range entries(t, conn, dir) {
		if strings.HasPrefix(c, "@e-") {
			out = append(out, c)
		}
	}
	return out
}

// waitCandidates blocks until dir has n election entries.
func waitCandidates(t *testing.T, conn *zk.Conn, dir string, n int) {
	t.Helper()
	ctx := testCtx(t)
	for {
		if got := len(candidates(t, conn, dir)); got == n {
			return
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("%s: want %d candidates, have %v", dir, n, candidates(t, conn, dir))
		}
	}
}

func info(l distlock.Leadership, value string) distlock.LeaderInfo {
	return distlock.LeaderInfo{Value: value, Token: l.Token()}
}

func TestElection(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	n := 0
	// candidate returns an election on a connection and session of its
	// own, on the servers in turn.
	candidate := func(t *testing.T, prefix, name string) (*recipe.Election, *zk.Conn) {
		conn, events := connect(t, ens, n%3)
		n++
		drain(events)
		el, err := recipe.NewElection(newSession(t, conn, recipe.WithPrefix(prefix)), name)
		if err != nil {
			t.Fatal(err)
		}
		return el, conn
	}

	t.Run("BadInput", func(t *testing.T) {
		if _, err := recipe.NewElection(nil, "x"); !errors.Is(err, distlock.ErrNilClient) {
			t.Errorf("NewElection(nil): %v, want ErrNilClient", err)
		}
		_, conn := candidate(t, newPrefix(), "ok")
		sess := newSession(t, conn)
		for _, name := range []string{"", "/a", "a@1", "a b"} {
			if _, err := recipe.NewElection(sess, name); !errors.Is(err, distlock.ErrInvalidName) {
				t.Errorf("name %q: %v, want ErrInvalidName", name, err)
			}
		}
	})

	t.Run("ProclaimDoesNotHandOver", func(t *testing.T) {
		prefix := newPrefix()
		x, _ := candidate(t, prefix, "proc")
		a, _ := candidate(t, prefix, "proc")
		b, _ := candidate(t, prefix, "proc")
		first := locktest.Leads(t, locktest.CampaignAsync(testCtx(t), x, "x"), "x")
		ra := locktest.CampaignAsync(testCtx(t), a, "a")
		waitCandidates(t, admin, x.Dir(), 2)
		rb := locktest.CampaignAsync(testCtx(t), b, "b")
		waitCandidates(t, admin, x.Dir(), 3)
		// The first leader never waited; its Proclaim must not hand over
		// either.
		if err := first.Proclaim(testCtx(t), "x2"); err != nil {
			t.Fatal(err)
		}
		obs := locktest.Observe(t, x)
		obs.Await(t, info(first, "x2"))
		locktest.NotLeading(t, "after the first leader's Proclaim", 500*time.Millisecond, ra, rb)
		locktest.MustResign(t, first)
		// a waited: its Resign is the set-data + delete transaction. Its
		// Proclaims are set-data alone, which a Mutex waiter would take for
		// a release.
		la := locktest.Leads(t, ra, "a")
		obs.Await(t, info(la, "a"))
		for i := range 5 {
			v := fmt.Sprint("a", i)
			if err := la.Proclaim(testCtx(t), v); err != nil {
				t.Fatalf("Proclaim %q: %v", v, err)
			}
			got, err := b.Leader(testCtx(t))
			if err != nil || got != info(la, v) {
				t.Fatalf("Leader after Proclaim %q: %v, %v", v, got, err)
			}
			obs.Await(t, info(la, v))
		}
		locktest.NotLeading(t, "after the Proclaims", time.Second, rb)
		if la.Err() != nil {
			t.Fatalf("the proclaiming leader lost: %v", la.Err())
		}
		if es := candidates(t, admin, x.Dir()); len(es) != 2 {
			t.Fatalf("candidates %v, want a's and b's", es)
		}
		locktest.MustResign(t, la)
		lb := locktest.Leads(t, rb, "b")
		obs.Await(t, info(lb, "b"))
		locktest.MustResign(t, lb)
		obs.Await(t, distlock.LeaderInfo{})
	})

	t.Run("DeposedByDeleteProclaimFails", func(t *testing.T) {
		prefix := newPrefix()
		a, _ := candidate(t, prefix, "dep")
		la := locktest.Leads(t, locktest.CampaignAsync(testCtx(t), a, "a"), "a")
		es := candidates(t, admin, a.Dir())
		if len(es) != 1 {
			t.Fatalf("candidates %v", es)
		}
		if err := admin.Delete(a.Dir()+"/"+es[0], -1); err != nil {
			t.Fatal(err)
		}
		recv(t, la.Done(), "Done after the foreign delete")
		if !errors.Is(la.Err(), distlock.ErrEntryGone) {
			t.Fatalf("Err %v, want ErrEntryGone", la.Err())
		}
		if err := la.Proclaim(testCtx(t), "x"); !errors.Is(err, distlock.ErrNotLeader) {
			t.Fatalf("Proclaim: %v, want ErrNotLeader", err)
		}
	})

	t.Run("ObserveInOrderAcrossFailures", func(t *testing.T) {
		prefix := newPrefix()
		a, _ := candidate(t, prefix, "obs")
		b, _ := candidate(t, prefix, "obs")
		o, oconn := candidate(t, prefix, "obs")
		obs := locktest.Observe(t, o)
		var want []distlock.LeaderInfo
		step := func(i distlock.LeaderInfo) {
			t.Helper()
			want = append(want, i)
			if seen := obs.Await(t, i); !slices.Equal(seen, want) {
				t.Fatalf("Observe saw %v, want %v", seen, want)
			}
		}
		step(distlock.LeaderInfo{})
		la := locktest.Leads(t, locktest.CampaignAsync(testCtx(t), a, "a"), "a")
		step(info(la, "a"))
		if err := la.Proclaim(testCtx(t), "a2"); err != nil {
			t.Fatal(err)
		}
		step(info(la, "a2"))
		rb := locktest.CampaignAsync(testCtx(t), b, "b")
		waitCandidates(t, admin, a.Dir(), 2)
		// The observer's connection drops: watches survive the reconnect.
		if err := ens.DropConnection(oconn); err != nil {
			t.Fatal(err)
		}
		locktest.MustResign(t, la)
		lb := locktest.Leads(t, rb, "b")
		step(info(lb, "b"))
		// The observer's session expires: Observe re-arms its watches on
		// the connection's next session.
		if err := ens.ExpireSession(testCtx(t), oconn); err != nil {
			t.Fatal(err)
		}
		if err := lb.Proclaim(testCtx(t), "b2"); err != nil {
			t.Fatal(err)
		}
		step(info(lb, "b2"))
		locktest.MustResign(t, lb)
		step(distlock.LeaderInfo{})
		la2 := locktest.Leads(t, locktest.CampaignAsync(testCtx(t), a, "again"), "a again")
		step(info(la2, "again"))
		locktest.MustResign(t, la2)
		step(distlock.LeaderInfo{})
		// Nothing else came in between: the next change is the next thing
		// Observe reports (step compares the whole sequence).
		last := locktest.Leads(t, locktest.CampaignAsync(testCtx(t), b, "last"), "last")
		step(info(last, "last"))
		locktest.MustResign(t, last)
	})

	t.Run("ObserveClosesWithCtx", func(t *testing.T) {
		el, _ := candidate(t, newPrefix(), "close")
		ctx, cancel := context.WithCancel(testCtx(t))
		ch := el.Observe(ctx)
		if i := recv(t, ch, "first value"); !i.NoLeader() {
			t.Fatalf("first value %v, want no leader", i)
		}
		cancel()
		for range ch {
		}
	})
}
