package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

// candidates lists the election entries ("@e-…") in dir, oldest first, as
// the leader sees them.
func candidates(t *testing.T, conn *zk.Conn, dir string) []string {
	t.Helper()
	for {
		_, err := conn.Sync(dir)
		var children []string
		if err == nil {
			children, _, err = conn.Children(dir)
		}
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err == nil {
			var out []string
			for _, c := range children {
				if strings.HasPrefix(c, "@e-") {
					out = append(out, c)
				}
			}
			slices.SortFunc(out, func(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) })
			return out
		}
		if testCtx(t).Err() != nil || (!errors.Is(err, zk.ErrConnectionClosed) && !errors.Is(err, zk.ErrNoServer)) {
			t.Fatalf("list %s: %v", dir, err)
		}
	}
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

type campaignResult struct {
	l   distlock.Leadership
	err error
}

func campaignAsync(ctx context.Context, el *zklock.Election, value string) <-chan campaignResult {
	ch := make(chan campaignResult, 1)
	go func() {
		l, err := el.Campaign(ctx, value)
		ch <- campaignResult{l, err}
	}()
	return ch
}

func mustLead(t *testing.T, ch <-chan campaignResult, what string) distlock.Leadership {
	t.Helper()
	r := recv(t, ch, what)
	if r.err != nil {
		t.Fatalf("%s: %v", what, r.err)
	}
	return r.l
}

func notLeading(t *testing.T, what string, d time.Duration, chs ...<-chan campaignResult) {
	t.Helper()
	deadline := time.After(d)
	for {
		for _, ch := range chs {
			select {
			case r := <-ch:
				t.Fatalf("%s: a waiting candidate returned (err %v)", what, r.err)
			default:
			}
		}
		select {
		case <-deadline:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func mustResign(t *testing.T, l distlock.Leadership) {
	t.Helper()
	if err := l.Resign(testCtx(t)); err != nil {
		t.Fatalf("resign: %v", err)
	}
}

// observed collects what Observe sends.
type observed struct {
	mu   sync.Mutex
	seen []distlock.LeaderInfo
	more chan struct{}
	done chan struct{}
}

func observe(ctx context.Context, el *zklock.Election) *observed {
	o := &observed{more: make(chan struct{}, 1), done: make(chan struct{})}
	ch := el.Observe(ctx)
	go func() {
		defer close(o.done)
		for i := range ch {
			o.mu.Lock()
			o.seen = append(o.seen, i)
			o.mu.Unlock()
			select {
			case o.more <- struct{}{}:
			default:
			}
		}
	}()
	return o
}

func (o *observed) get() []distlock.LeaderInfo {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.seen)
}

// await waits until the last value Observe sent is want, and returns all.
func (o *observed) await(t *testing.T, want distlock.LeaderInfo) []distlock.LeaderInfo {
	t.Helper()
	ctx := testCtx(t)
	for {
		seen := o.get()
		if len(seen) > 0 && seen[len(seen)-1] == want {
			return seen
		}
		select {
		case <-o.more:
		case <-ctx.Done():
			t.Fatalf("Observe: saw %v, waiting for %v", seen, want)
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
	candidate := func(t *testing.T, prefix, name string) (*zklock.Election, *zk.Conn) {
		conn, events := connect(t, ens, n%3)
		n++
		drain(events)
		el, err := zklock.NewElection(newSession(t, conn, zklock.WithPrefix(prefix)), name)
		if err != nil {
			t.Fatal(err)
		}
		return el, conn
	}

	t.Run("BadInput", func(t *testing.T) {
		if _, err := zklock.NewElection(nil, "x"); !errors.Is(err, distlock.ErrNilClient) {
			t.Errorf("NewElection(nil): %v, want ErrNilClient", err)
		}
		el, _ := candidate(t, newPrefix(), "ok")
		for _, name := range []string{"", "/a", "a@1", "a b"} {
			if _, err := zklock.NewElection(el.Session(), name); !errors.Is(err, distlock.ErrInvalidName) {
				t.Errorf("name %q: %v, want ErrInvalidName", name, err)
			}
		}
	})

	t.Run("NoLeader", func(t *testing.T) {
		el, _ := candidate(t, newPrefix(), "empty")
		if _, err := el.Leader(testCtx(t)); !errors.Is(err, distlock.ErrNoLeader) {
			t.Fatalf("Leader of an empty election: %v, want ErrNoLeader", err)
		}
		l := mustLead(t, campaignAsync(testCtx(t), el, "v"), "campaign")
		got, err := el.Leader(testCtx(t))
		if err != nil || got != info(l, "v") {
			t.Fatalf("Leader: %v, %v; want %v", got, err, info(l, "v"))
		}
		mustResign(t, l)
		if _, err := el.Leader(testCtx(t)); !errors.Is(err, distlock.ErrNoLeader) {
			t.Fatalf("Leader after the resign: %v, want ErrNoLeader", err)
		}
	})

	t.Run("OneLeaderAmongN", func(t *testing.T) {
		prefix := newPrefix()
		const n = 5
		res := make([]<-chan campaignResult, n)
		var els []*zklock.Election
		for i := range n {
			el, _ := candidate(t, prefix, "one")
			els = append(els, el)
			res[i] = campaignAsync(testCtx(t), el, fmt.Sprint("c", i))
		}
		waitCandidates(t, admin, els[0].Dir(), n)
		// Exactly one leads at a time; Resign hands over at once, to the
		// oldest waiter, with a newer token.
		var prev distlock.Token
		for round := range n {
			var leader distlock.Leadership
			idx := -1
			deadline := time.After(testTimeout)
			for idx == -1 {
				for i, ch := range res {
					if ch == nil {
						continue
					}
					select {
					case r := <-ch:
						if r.err != nil {
							t.Fatalf("candidate %d: %v", i, r.err)
						}
						leader, idx = r.l, i
					default:
					}
					if idx != -1 {
						break
					}
				}
				select {
				case <-deadline:
					t.Fatalf("round %d: nobody leads", round)
				case <-time.After(5 * time.Millisecond):
				}
			}
			res[idx] = nil
			var waiting []<-chan campaignResult
			for _, ch := range res {
				if ch != nil {
					waiting = append(waiting, ch)
				}
			}
			notLeading(t, fmt.Sprintf("round %d", round), 200*time.Millisecond, waiting...)
			if !prev.IsZero() && !leader.Token().Newer(prev) {
				t.Fatalf("round %d: token %v not newer than %v", round, leader.Token(), prev)
			}
			prev = leader.Token()
			got, err := els[0].Leader(testCtx(t))
			if err != nil || got != info(leader, fmt.Sprint("c", idx)) {
				t.Fatalf("round %d: Leader %v, %v; want %v", round, got, err, info(leader, fmt.Sprint("c", idx)))
			}
			if got := len(candidates(t, admin, els[0].Dir())); got != n-round {
				t.Fatalf("round %d: %d candidates, want %d", round, got, n-round)
			}
			mustResign(t, leader)
			if !errors.Is(leader.Err(), distlock.ErrReleased) {
				t.Fatalf("Err after Resign: %v, want ErrReleased", leader.Err())
			}
			if err := leader.Resign(testCtx(t)); !errors.Is(err, distlock.ErrNotLeader) {
				t.Fatalf("second Resign: %v, want ErrNotLeader", err)
			}
		}
		if es := candidates(t, admin, els[0].Dir()); len(es) != 0 {
			t.Fatalf("candidates left: %v", es)
		}
	})

	t.Run("ProclaimDoesNotHandOver", func(t *testing.T) {
		prefix := newPrefix()
		x, _ := candidate(t, prefix, "proc")
		a, _ := candidate(t, prefix, "proc")
		b, _ := candidate(t, prefix, "proc")
		first := mustLead(t, campaignAsync(testCtx(t), x, "x"), "x")
		ra := campaignAsync(testCtx(t), a, "a")
		waitCandidates(t, admin, x.Dir(), 2)
		rb := campaignAsync(testCtx(t), b, "b")
		waitCandidates(t, admin, x.Dir(), 3)
		// The first leader never waited; its Proclaim must not hand over
		// either.
		if err := first.Proclaim(testCtx(t), "x2"); err != nil {
			t.Fatal(err)
		}
		obs := observe(testCtx(t), x)
		obs.await(t, info(first, "x2"))
		notLeading(t, "after the first leader's Proclaim", 500*time.Millisecond, ra, rb)
		mustResign(t, first)
		// a waited: its Resign is the set-data + delete transaction. Its
		// Proclaims are set-data alone, which a Mutex waiter would take for
		// a release.
		la := mustLead(t, ra, "a")
		obs.await(t, info(la, "a"))
		for i := range 5 {
			v := fmt.Sprint("a", i)
			if err := la.Proclaim(testCtx(t), v); err != nil {
				t.Fatalf("Proclaim %q: %v", v, err)
			}
			got, err := b.Leader(testCtx(t))
			if err != nil || got != info(la, v) {
				t.Fatalf("Leader after Proclaim %q: %v, %v", v, got, err)
			}
			obs.await(t, info(la, v))
		}
		notLeading(t, "after the Proclaims", time.Second, rb)
		if la.Err() != nil {
			t.Fatalf("the proclaiming leader lost: %v", la.Err())
		}
		if es := candidates(t, admin, x.Dir()); len(es) != 2 {
			t.Fatalf("candidates %v, want a's and b's", es)
		}
		mustResign(t, la)
		lb := mustLead(t, rb, "b")
		obs.await(t, info(lb, "b"))
		mustResign(t, lb)
		obs.await(t, distlock.LeaderInfo{})
	})

	t.Run("LeaderExpired", func(t *testing.T) {
		prefix := newPrefix()
		a, aconn := candidate(t, prefix, "exp")
		b, _ := candidate(t, prefix, "exp")
		obs := observe(testCtx(t), b)
		obs.await(t, distlock.LeaderInfo{})
		la := mustLead(t, campaignAsync(testCtx(t), a, "a"), "a")
		obs.await(t, info(la, "a"))
		rb := campaignAsync(testCtx(t), b, "b")
		waitCandidates(t, admin, a.Dir(), 2)
		start := time.Now()
		if err := ens.ExpireSession(testCtx(t), aconn); err != nil {
			t.Fatal(err)
		}
		recv(t, la.Context().Done(), "the deposed leader's Context")
		if !errors.Is(la.Err(), distlock.ErrLost) {
			t.Fatalf("Err %v, want ErrLost", la.Err())
		}
		lb := mustLead(t, rb, "b")
		seen := obs.await(t, info(lb, "b"))
		t.Logf("failover %v", time.Since(start))
		if !lb.Token().Newer(la.Token()) {
			t.Fatalf("token %v not newer than %v", lb.Token(), la.Token())
		}
		want := []distlock.LeaderInfo{{}, info(la, "a"), info(lb, "b")}
		if !slices.Equal(seen, want) {
			t.Fatalf("Observe saw %v, want %v", seen, want)
		}
		if err := la.Proclaim(testCtx(t), "stale"); !errors.Is(err, distlock.ErrNotLeader) {
			t.Fatalf("Proclaim by the deposed leader: %v, want ErrNotLeader", err)
		}
		if err := la.Resign(testCtx(t)); !errors.Is(err, distlock.ErrNotLeader) {
			t.Fatalf("Resign by the deposed leader: %v, want ErrNotLeader", err)
		}
		if got, err := b.Leader(testCtx(t)); err != nil || got != info(lb, "b") {
			t.Fatalf("Leader %v, %v; want %v", got, err, info(lb, "b"))
		}
		mustResign(t, lb)
	})

	t.Run("DeposedByDeleteProclaimFails", func(t *testing.T) {
		prefix := newPrefix()
		a, _ := candidate(t, prefix, "dep")
		la := mustLead(t, campaignAsync(testCtx(t), a, "a"), "a")
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
		obs := observe(testCtx(t), o)
		var want []distlock.LeaderInfo
		step := func(i distlock.LeaderInfo) {
			t.Helper()
			want = append(want, i)
			if seen := obs.await(t, i); !slices.Equal(seen, want) {
				t.Fatalf("Observe saw %v, want %v", seen, want)
			}
		}
		step(distlock.LeaderInfo{})
		la := mustLead(t, campaignAsync(testCtx(t), a, "a"), "a")
		step(info(la, "a"))
		if err := la.Proclaim(testCtx(t), "a2"); err != nil {
			t.Fatal(err)
		}
		step(info(la, "a2"))
		rb := campaignAsync(testCtx(t), b, "b")
		waitCandidates(t, admin, a.Dir(), 2)
		// The observer's connection drops: watches survive the reconnect.
		if err := ens.DropConnection(oconn); err != nil {
			t.Fatal(err)
		}
		mustResign(t, la)
		lb := mustLead(t, rb, "b")
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
		mustResign(t, lb)
		step(distlock.LeaderInfo{})
		la2 := mustLead(t, campaignAsync(testCtx(t), a, "again"), "a again")
		step(info(la2, "again"))
		mustResign(t, la2)
		step(distlock.LeaderInfo{})
		time.Sleep(200 * time.Millisecond)
		if seen := obs.get(); !slices.Equal(seen, want) {
			t.Fatalf("Observe saw %v, want %v", seen, want)
		}
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

	t.Run("CancelledCampaignLeavesNoNode", func(t *testing.T) {
		prefix := newPrefix()
		a, _ := candidate(t, prefix, "cancel")
		b, _ := candidate(t, prefix, "cancel")
		la := mustLead(t, campaignAsync(testCtx(t), a, "a"), "a")
		ctx, cancel := context.WithCancel(testCtx(t))
		rb := campaignAsync(ctx, b, "b")
		waitCandidates(t, admin, a.Dir(), 2)
		cancel()
		r := recv(t, rb, "the cancelled campaign")
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled Campaign: %v, want context.Canceled", r.err)
		}
		if es := candidates(t, admin, a.Dir()); len(es) != 1 {
			t.Fatalf("candidates %v, want the leader's only", es)
		}
		dctx, dcancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
		defer dcancel()
		if _, err := b.Campaign(dctx, "b"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Campaign past its deadline: %v, want DeadlineExceeded", err)
		}
		if es := candidates(t, admin, a.Dir()); len(es) != 1 {
			t.Fatalf("candidates %v, want the leader's only", es)
		}
		mustResign(t, la)
		if es := candidates(t, admin, a.Dir()); len(es) != 0 {
			t.Fatalf("candidates left: %v", es)
		}
	})

	t.Run("ElectionAndMutexApart", func(t *testing.T) {
		prefix := newPrefix()
		el, conn := candidate(t, prefix, "both")
		l := mustLead(t, campaignAsync(testCtx(t), el, "v"), "campaign")
		// A Mutex of the same name is another queue: it neither waits for
		// the leader nor is waited for.
		m := newMutex(t, newSession(t, conn, zklock.WithPrefix(prefix)), "both")
		lease, err := m.TryLock(testCtx(t))
		if err != nil {
			t.Fatalf("TryLock beside a leader: %v", err)
		}
		q, err := zklock.Inspect(testCtx(t), admin, prefix, "both")
		if err != nil || len(q) != 2 || q[0].Holder != "v" || q[0].Token != l.Token() {
			t.Fatalf("Inspect: %v, %v", q, err)
		}
		mustUnlock(t, lease)
		mustResign(t, l)
	})
}

// TestRunAsLeader runs distlock.RunAsLeader with 5 workers on a real
// ensemble and expires the leader's session over and over: every worker
// writes through one fencing.Memory fence with its term's token, and the
// ledger of admitted writes never goes back in token order.
func TestRunAsLeader(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	prefix := newPrefix()
	fence, err := fencing.NewMemory("worker")
	if err != nil {
		t.Fatal(err)
	}
	type write struct {
		worker int
		token  distlock.Token
	}
	var (
		mu     sync.Mutex
		ledger []write
		conns  []*zk.Conn
	)
	type term struct {
		worker int
		token  distlock.Token
	}
	terms := make(chan term, 100)
	ctx, cancel := context.WithCancel(testCtx(t))
	var wg sync.WaitGroup
	const workers = 5
	for w := range workers {
		conn, events := connect(t, ens, w%3)
		drain(events)
		conns = append(conns, conn)
		el, err := zklock.NewElection(newSession(t, conn, zklock.WithPrefix(prefix)), "worker")
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each session ends at its expiry: a worker whose session
			// expired campaigns on a new one.
			s := el.Session()
			for ctx.Err() == nil {
				rctx, rcancel := context.WithCancel(ctx)
				go func() {
					select {
					case <-s.Done():
						rcancel()
					case <-rctx.Done():
					}
				}()
				distlock.RunAsLeader(rctx, el, fmt.Sprint("w", w), func(fctx context.Context, tok distlock.Token) error {
					terms <- term{w, tok}
					// Keeps writing, even past the loss of leadership,
					// until its context says stop (and then a few more):
					// the fence orders it.
					for i := 0; ; i++ {
						err := fence.Do(context.Background(), tok, func(context.Context) error {
							mu.Lock()
							ledger = append(ledger, write{w, tok})
							mu.Unlock()
							return nil
						})
						if err != nil {
							return err
						}
						if fctx.Err() != nil && i%3 == 0 {
							return fctx.Err()
						}
						time.Sleep(2 * time.Millisecond)
					}
				})
				rcancel()
				if ctx.Err() != nil {
					return
				}
				ns, err := zklock.NewSession(ctx, conn, zklock.WithPrefix(prefix))
				if err != nil {
					return
				}
				t.Cleanup(func() { ns.Close(context.Background()) })
				if el, err = zklock.NewElection(ns, "worker"); err != nil {
					return
				}
				s = ns
			}
		}()
	}
	leaders := map[int]bool{}
	for kill := 0; kill < 4; kill++ {
		tm := recv(t, terms, "a term")
		leaders[tm.worker] = true
		time.Sleep(100 * time.Millisecond)
		if err := ens.ExpireSession(testCtx(t), conns[tm.worker]); err != nil {
			t.Fatal(err)
		}
	}
	tm := recv(t, terms, "the last term")
	leaders[tm.worker] = true
	time.Sleep(100 * time.Millisecond)
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(leaders) < 3 {
		t.Fatalf("%d distinct leaders, want ≥ 3", len(leaders))
	}
	for i := 1; i < len(ledger); i++ {
		if ledger[i].token.Seq < ledger[i-1].token.Seq {
			t.Fatalf("write %d by worker %d with token %v after token %v", i, ledger[i].worker, ledger[i].token, ledger[i-1].token)
		}
	}
	t.Logf("%d writes, %d leaders", len(ledger), len(leaders))
}
