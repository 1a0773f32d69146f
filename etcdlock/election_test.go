package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/fencing"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func newElection(t *testing.T, s *etcdlock.Session, name string) *etcdlock.Election {
	t.Helper()
	e, err := etcdlock.NewElection(s, name)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type campaignResult struct {
	who string
	l   distlock.Leadership
	err error
}

func campaignAsync(ctx context.Context, e *etcdlock.Election, value string) <-chan campaignResult {
	ch := make(chan campaignResult, 1)
	go func() {
		l, err := e.Campaign(ctx, value)
		ch <- campaignResult{who: value, l: l, err: err}
	}()
	return ch
}

func mustCampaign(t *testing.T, e *etcdlock.Election, value string) distlock.Leadership {
	t.Helper()
	l, err := e.Campaign(testCtx(t), value)
	if err != nil {
		t.Fatalf("campaign %q: %v", value, err)
	}
	return l
}

func wantLeader(t *testing.T, e *etcdlock.Election, value string, token distlock.Token) {
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
	if _, err := etcdlock.NewElection(nil, "x"); !errors.Is(err, distlock.ErrNilClient) {
		t.Fatalf("nil session: %v", err)
	}
	if _, err := etcdlock.NewElection(newSession(t, clus.Client(0)), "a/@b"); err == nil {
		t.Fatal("invalid name accepted")
	}
}

func TestElectionNoLeader(t *testing.T) {
	clus := newCluster(t)
	e := newElection(t, newSession(t, clus.Client(0)), "empty")
	if _, err := e.Leader(testCtx(t)); !errors.Is(err, distlock.ErrNoLeader) {
		t.Fatalf("Leader of an empty election: %v, want ErrNoLeader", err)
	}
}

// One leader among N candidates, each on a session of its own spread over
// the members; each Resign hands over to exactly one next leader at once.
func TestElectionOneLeader(t *testing.T) {
	clus := newCluster(t)
	const n = 5
	res := make(chan campaignResult, n)
	for i := range n {
		e := newElection(t, newSession(t, newClient(t, clus, i%3)), "one")
		ctx := testCtx(t)
		go func() { res <- <-campaignAsync(ctx, e, fmt.Sprint("c", i)) }()
	}
	obs := newElection(t, newSession(t, clus.Client(0)), "one")
	var prev distlock.Token
	for i := range n {
		r := recv(t, res, "a leader")
		if r.err != nil {
			t.Fatalf("campaign %s: %v", r.who, r.err)
		}
		if !r.l.Token().Newer(prev) && !prev.IsZero() {
			t.Fatalf("leader %s token %v not newer than %v", r.who, r.l.Token(), prev)
		}
		prev = r.l.Token()
		wantLeader(t, obs, r.who, r.l.Token())
		// Nobody else leads meanwhile.
		select {
		case other := <-res:
			t.Fatalf("two leaders: %s and %s (%v)", r.who, other.who, other.err)
		case <-time.After(200 * time.Millisecond):
		}
		began := time.Now()
		if err := r.l.Resign(testCtx(t)); err != nil {
			t.Fatalf("resign %s: %v", r.who, err)
		}
		recv(t, r.l.Done(), "Done after Resign")
		if !errors.Is(r.l.Err(), distlock.ErrReleased) {
			t.Fatalf("Err after Resign: %v", r.l.Err())
		}
		if i < n-1 {
			// Resign hands over at once: the next Campaign returns within
			// a few round trips, not after a TTL.
			next := recv(t, res, "next leader after Resign")
			if d := time.Since(began); d > 2*time.Second {
				t.Fatalf("handover after Resign took %v", d)
			}
			res <- next
		}
	}
	if _, err := obs.Leader(testCtx(t)); !errors.Is(err, distlock.ErrNoLeader) {
		t.Fatalf("Leader after everyone resigned: %v", err)
	}
	if keys := queueKeys(t, clus.Client(0), "one"); len(keys) != 0 {
		t.Fatalf("entries left: %v", keys)
	}
}

// The leader's session lost: its Context is cancelled, a new leader is
// observed, and the deposed leader can neither Proclaim nor Resign.
func TestElectionLeaderSessionLost(t *testing.T) {
	clus := newCluster(t)
	cli := clus.Client(0)
	sa := newSession(t, newClient(t, clus, 1), etcdlock.WithTTL(etcdlock.MinTTL))
	ea := newElection(t, sa, "lost")
	eb := newElection(t, newSession(t, newClient(t, clus, 2)), "lost")
	obs := newElection(t, newSession(t, cli), "lost")
	octx, ocancel := context.WithCancel(testCtx(t))
	defer ocancel()
	ch := obs.Observe(octx)
	if info := nextInfo(t, ch, "initial"); !info.NoLeader() {
		t.Fatalf("initial: %+v, want no leader", info)
	}

	// The watch starts before a's put: one on a lagging member could
	// otherwise still deliver it after a's Campaign returned.
	qw := watchQueue(t, cli, "lost")
	a := mustCampaign(t, ea, "a")
	if info := nextInfo(t, ch, "a leads"); info.Value != "a" || info.Token != a.Token() {
		t.Fatalf("observed %+v, want a %v", info, a.Token())
	}
	qw.nextPut() // a's
	bres := campaignAsync(testCtx(t), eb, "b")
	qw.nextPut()

	if _, err := cli.Revoke(testCtx(t), sa.Lease()); err != nil {
		t.Fatal(err)
	}
	recv(t, a.Context().Done(), "deposed leader's Context")
	if err := a.Err(); !errors.Is(err, distlock.ErrLost) {
		t.Fatalf("deposed leader's Err: %v, want ErrLost", err)
	}
	b := recv(t, bres, "b after a's session was revoked")
	if b.err != nil {
		t.Fatal(b.err)
	}
	if info := nextInfo(t, ch, "b leads"); info.Value != "b" || info.Token != b.l.Token() {
		t.Fatalf("observed %+v, want b %v", info, b.l.Token())
	}
	if err := a.Proclaim(testCtx(t), "a again"); !errors.Is(err, distlock.ErrNotLeader) {
		t.Fatalf("Proclaim by the deposed leader: %v, want ErrNotLeader", err)
	}
	if err := a.Resign(testCtx(t)); !errors.Is(err, distlock.ErrNotLeader) {
		t.Fatalf("Resign by the deposed leader: %v, want ErrNotLeader", err)
	}
	wantLeader(t, obs, "b", b.l.Token())
}

// Proclaim races the leader's own watch on its entry: whether the deposed
// leader has noticed yet or not, the guarded Txn refuses to write.
func TestElectionProclaimDeposed(t *testing.T) {
	clus := newCluster(t)
	cli := clus.Client(0)
	e := newElection(t, newSession(t, newClient(t, clus, 1)), "proclaim")
	l := mustCampaign(t, e, "v1")
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

// Observe sees every change, including "no leader", in order.
func TestElectionObserveOrder(t *testing.T) {
	clus := newCluster(t)
	cli := clus.Client(0)
	ea := newElection(t, newSession(t, newClient(t, clus, 1)), "observe")
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

	a := mustCampaign(t, ea, "a")
	want("a leads", "a", a.Token())
	if err := a.Proclaim(testCtx(t), "a2"); err != nil {
		t.Fatal(err)
	}
	want("a proclaims", "a2", a.Token())
	if err := a.Resign(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	want("a resigned, nobody waiting", "", distlock.Token{})

	qw := watchQueue(t, cli, "observe")
	b := mustCampaign(t, eb, "b")
	want("b leads", "b", b.Token())
	qw.nextPut() // b's
	cres := campaignAsync(testCtx(t), ec, "c")
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
	if c.err != nil {
		t.Fatal(c.err)
	}
	want("b resigned into c (no gap)", "c", c.l.Token())
	if err := c.l.Resign(testCtx(t)); err != nil {
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
	l := mustCampaign(t, e, "a")
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

// A cancelled campaign leaves no entry behind.
func TestElectionCancelledCampaign(t *testing.T) {
	clus := newCluster(t)
	cli := clus.Client(0)
	a := mustCampaign(t, newElection(t, newSession(t, cli), "cancel"), "a")
	qw := watchQueue(t, cli, "cancel")
	ctx, cancel := context.WithCancel(testCtx(t))
	bres := campaignAsync(ctx, newElection(t, newSession(t, newClient(t, clus, 1)), "cancel"), "b")
	qw.nextPut()
	cancel()
	b := recv(t, bres, "cancelled campaign")
	if !errors.Is(b.err, context.Canceled) {
		t.Fatalf("cancelled campaign: %v, want context.Canceled", b.err)
	}
	if keys := queueKeys(t, cli, "cancel"); len(keys) != 1 {
		t.Fatalf("entries after the cancelled campaign: %v, want only the leader's", keys)
	}
	if err := a.Resign(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if keys := queueKeys(t, cli, "cancel"); len(keys) != 0 {
		t.Fatalf("entries left: %v", keys)
	}
}

// RunAsLeader with 5 workers and repeated leader kills. Each worker's fn
// ignores its context (it stops only when the fence refuses it), and every
// write goes through one fencing.Memory fence: the admitted writes never go
// back in token order, the deposed leaders are refused, and several
// leaders wrote.
func TestRunAsLeaderFenced(t *testing.T) {
	clus := newCluster(t)
	cli := clus.Client(0)
	const workers, kills = 5, 3
	fence, err := fencing.NewMemory("worker")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		ledger  []int64 // tokens of admitted writes, in the fence's order
		refused int
	)
	type term struct {
		worker int
		token  distlock.Token
	}
	terms := make(chan term, 100)
	stop := make(chan struct{}) // ends fns that ignore their context
	sessions := make([]*etcdlock.Session, workers)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	done := make(chan error, workers)
	for i := range workers {
		sessions[i] = newSession(t, newClient(t, clus, i%3), etcdlock.WithTTL(etcdlock.MinTTL))
		e := newElection(t, sessions[i], "worker")
		go func() {
			done <- distlock.RunAsLeader(ctx, e, fmt.Sprint("w", i), func(_ context.Context, tok distlock.Token) error {
				terms <- term{worker: i, token: tok}
				for {
					err := fence.Do(context.Background(), tok, func(context.Context) error {
						mu.Lock()
						ledger = append(ledger, tok.Seq)
						mu.Unlock()
						return nil
					})
					if err != nil {
						if !errors.Is(err, fencing.ErrStale) {
							return err
						}
						mu.Lock()
						refused++
						mu.Unlock()
						return err
					}
					select {
					case <-stop:
						return nil
					case <-time.After(2 * time.Millisecond):
					}
				}
			})
		}()
	}

	leaders := map[int64]int{}
	for k := 0; k <= kills; k++ {
		tm := recv(t, terms, "a leader's term")
		leaders[tm.token.Seq] = tm.worker
		if k == kills {
			break
		}
		time.Sleep(50 * time.Millisecond) // let it write a little
		if _, err := cli.Revoke(testCtx(t), sessions[tm.worker].Lease()); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	close(stop)
	cancel()
	for range workers {
		if err := recv(t, done, "RunAsLeader's return"); !errors.Is(err, context.Canceled) {
			t.Fatalf("RunAsLeader returned %v, want ctx's cause", err)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	distinct := map[int64]bool{}
	for i, tok := range ledger {
		if i > 0 && tok < ledger[i-1] {
			t.Fatalf("admitted writes out of token order at %d: %d after %d", i, tok, ledger[i-1])
		}
		distinct[tok] = true
	}
	if len(distinct) < 3 {
		t.Fatalf("%d distinct leaders wrote, want at least 3 (ledger of %d writes)", len(distinct), len(ledger))
	}
	// Every killed leader ignored its context and kept writing until the
	// next leader's first write made the fence refuse it.
	if refused < kills {
		t.Fatalf("%d stale writes refused, want at least %d (one per killed leader)", refused, kills)
	}
	t.Logf("%d admitted writes by %d leaders (%v), %d stale writes refused", len(ledger), len(distinct), leaders, refused)
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
		a := mustCampaign(t, ea, "a")
		qw.nextPut() // a's
		bres := campaignAsync(testCtx(t), eb, "b")
		bkey := qw.nextPut()
		if _, err := cli.Delete(testCtx(t), bkey); err != nil {
			t.Fatal(err)
		}
		if err := a.Resign(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		b := recv(t, bres, "b's campaign")
		if b.err == nil {
			t.Fatalf("round %d: b returned leadership %v though its entry was deleted", i, b.l.Token())
		}
		if !errors.Is(b.err, distlock.ErrEntryGone) {
			t.Fatalf("round %d: b's campaign: %v, want ErrEntryGone", i, b.err)
		}
		if keys := queueKeys(t, cli, "phantom"); len(keys) != 0 {
			t.Fatalf("round %d: entries left: %v", i, keys)
		}
	}
}
