package locktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
)

// Elector is a backend's election: Campaign (distlock.Elector), and the
// reads anyone can make, Leader and Observe.
type Elector interface {
	distlock.Elector
	// Leader returns the current leader, or an error wrapping
	// distlock.ErrNoLeader.
	Leader(ctx context.Context) (distlock.LeaderInfo, error)
	// Observe streams the leader: the current one, then every change,
	// "no leader" (the zero LeaderInfo) included.
	Observe(ctx context.Context) <-chan distlock.LeaderInfo
}

// electionCases are the election's part of the contract. Entries and
// WaitEntries of a Backend count an election's candidates as well as a
// lock's entries.
var electionCases = []struct {
	name string
	run  func(t *testing.T, b Backend)
}{
	{"ElectionNoLeader", electionNoLeader},
	{"ElectionOneLeaderResignHandsOver", electionOneLeader},
	{"ElectionProclaimDoesNotHandOver", electionProclaim},
	{"ElectionLeaderSessionEnds", electionLeaderSessionEnds},
	{"ElectionObserveOrder", electionObserveOrder},
	{"ElectionCancelledCampaignLeavesNothing", electionCancelledCampaign},
	{"ElectionAndMutexDoNotInterfere", electionAndMutex},
	{"ElectionRunAsLeaderFenced", electionRunAsLeader},
	{"ElectionHandOffNamed", electionHandOffNamed},
	{"ElectionHandOffVanishedCandidate", electionHandOffVanished},
	{"ElectionHandOffNobodyWaits", electionHandOffNobody},
	{"ElectionHandOffRacesLeaderLoss", electionHandOffRacesLeaderLoss},
	{"ElectionHandOffRacesSuccessorLoss", electionHandOffRacesSuccessorLoss},
	{"ElectionPriorityOrder", electionPriorityOrder},
	{"ElectionPreemptCooperative", electionPreemptCooperative},
	{"ElectionPreemptForced", electionPreemptForced},
	{"ElectionObserveHandOffs", electionObserveHandOffs},
	{"ElectionStepDownDelayed", electionStepDownDelayed},
	{"ElectionStepDownRefused", electionStepDownRefused},
	{"ElectionStepDownDropped", electionStepDownDropped},
	{"ElectionStepDownReplyLost", electionStepDownReplyLost},
	{"ElectionStepDownDeadline1ms", electionStepDownDeadline},
	{"ElectionStepDownDeadlineSweep", electionStepDownDeadlines},
	{"ElectionErrorWords", electionWords},
}

func election(t *testing.T, s Session, name string) Elector {
	t.Helper()
	e, err := s.Election(name)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Campaigned is what a Campaign running in the background returned.
type Campaigned struct {
	Leadership distlock.Leadership
	Err        error
}

// CampaignAsync runs e.Campaign(ctx, value) in a goroutine.
func CampaignAsync(ctx context.Context, e distlock.Elector, value string) <-chan Campaigned {
	ch := make(chan Campaigned, 1)
	go func() {
		l, err := e.Campaign(ctx, value)
		ch <- Campaigned{l, err}
	}()
	return ch
}

// MustCampaign campaigns in e and fails the test unless it leads.
func MustCampaign(t *testing.T, e distlock.Elector, value string) distlock.Leadership {
	t.Helper()
	l, err := e.Campaign(Ctx(t), value)
	if err != nil {
		t.Fatalf("campaign %q: %v", value, err)
	}
	return l
}

// MustResign resigns l or fails the test.
func MustResign(t *testing.T, l distlock.Leadership) {
	t.Helper()
	if err := l.Resign(Ctx(t)); err != nil {
		t.Fatalf("resign: %v", err)
	}
}

// Leads waits for a background Campaign and checks that it leads.
func Leads(t *testing.T, ch <-chan Campaigned, what string) distlock.Leadership {
	t.Helper()
	r := Recv(t, ch, what)
	if r.Err != nil {
		t.Fatalf("%s: %v", what, r.Err)
	}
	return r.Leadership
}

// NotLeading fails if any of the background Campaigns returns within d.
func NotLeading(t *testing.T, what string, d time.Duration, chs ...<-chan Campaigned) {
	t.Helper()
	deadline := time.After(d)
	for {
		for _, ch := range chs {
			select {
			case r := <-ch:
				t.Fatalf("%s: a waiting candidate returned (err %v)", what, r.Err)
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

func leaderInfo(l distlock.Leadership, value string) distlock.LeaderInfo {
	return distlock.LeaderInfo{Value: value, Token: l.Token()}
}

func wantLeader(t *testing.T, e Elector, want distlock.LeaderInfo, what string) {
	t.Helper()
	got, err := e.Leader(Ctx(t))
	if err != nil || got != want {
		t.Fatalf("%s: Leader %+v, %v; want %+v", what, got, err, want)
	}
}

func wantNoLeader(t *testing.T, e Elector, what string) {
	t.Helper()
	if got, err := e.Leader(Ctx(t)); !errors.Is(err, distlock.ErrNoLeader) {
		t.Fatalf("%s: Leader %+v, %v; want ErrNoLeader", what, got, err)
	}
}

// Observer collects what an Observe sends; it is stopped, and its
// goroutine gone, when the test ends.
type Observer struct {
	mu   sync.Mutex
	seen []distlock.LeaderInfo
	more chan struct{}
}

// Observe starts collecting what e.Observe sends.
func Observe(t *testing.T, e Elector) *Observer {
	ctx, cancel := context.WithCancel(context.Background())
	o := &Observer{more: make(chan struct{}, 1)}
	ch := e.Observe(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
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
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return o
}

// Seen returns what was sent so far, in order.
func (o *Observer) Seen() []distlock.LeaderInfo {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.seen)
}

// Await waits until the last value sent is want, and returns all sent.
func (o *Observer) Await(t *testing.T, want distlock.LeaderInfo) []distlock.LeaderInfo {
	t.Helper()
	ctx := Ctx(t)
	for {
		seen := o.Seen()
		if len(seen) > 0 && seen[len(seen)-1] == want {
			return seen
		}
		select {
		case <-o.more:
		case <-ctx.Done():
			t.Fatalf("Observe: saw %v, waiting for %+v", seen, want)
		}
	}
}

// wantNotLeader checks that err wraps distlock.ErrNotLeader.
func wantNotLeader(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, distlock.ErrNotLeader) {
		t.Fatalf("%s: %v, want ErrNotLeader", what, err)
	}
}

func electionNoLeader(t *testing.T, b Backend) {
	e := election(t, b.Session(t), "empty")
	wantNoLeader(t, e, "empty election")
	o := Observe(t, e)
	o.Await(t, distlock.LeaderInfo{})
	l := MustCampaign(t, e, "v")
	wantLeader(t, e, leaderInfo(l, "v"), "after the campaign")
	MustResign(t, l)
	wantNoLeader(t, e, "after the resign")
	wantEntries(t, b, "empty", 0, "after the resign")
}

// electionOneLeader: one leader among n candidates, each on a session of
// its own; the others block. Each Resign hands over at once to the oldest
// waiter with a newer token, and a resigned leader can neither Resign nor
// Proclaim again.
func electionOneLeader(t *testing.T, b Backend) {
	const n = 4
	els := make([]Elector, n)
	for i := range els {
		els[i] = election(t, b.Session(t), "one")
	}
	first := MustCampaign(t, els[0], "c0")
	res := make([]<-chan Campaigned, n)
	for i := 1; i < n; i++ {
		res[i] = CampaignAsync(Ctx(t), els[i], fmt.Sprint("c", i))
		b.WaitEntries(t, "one", i+1)
	}
	wantEntries(t, b, "one", n, "all campaigning")
	leader := first
	for i := range n {
		NotLeading(t, fmt.Sprintf("while c%d leads", i), 100*time.Millisecond, res[i+1:]...)
		wantLeader(t, els[(i+1)%n], leaderInfo(leader, fmt.Sprint("c", i)), fmt.Sprintf("c%d leads", i))
		if leader.Err() != nil {
			t.Fatalf("c%d: Err %v while leading", i, leader.Err())
		}
		began := time.Now()
		MustResign(t, leader)
		Recv(t, leader.Done(), "Done after Resign")
		if !errors.Is(leader.Err(), distlock.ErrReleased) {
			t.Fatalf("c%d: Err after Resign: %v, want ErrReleased", i, leader.Err())
		}
		wantNotLeader(t, leader.Resign(Ctx(t)), "second Resign")
		wantNotLeader(t, leader.Proclaim(Ctx(t), "again"), "Proclaim after Resign")
		if i == n-1 {
			break
		}
		next := Leads(t, res[i+1], fmt.Sprintf("c%d after c%d resigned", i+1, i))
		// At once: a few round trips, not a session's TTL.
		if d := time.Since(began); d > 5*time.Second {
			t.Fatalf("handover after Resign took %v", d)
		}
		if !next.Token().Newer(leader.Token()) {
			t.Fatalf("c%d: token %v not newer than %v", i+1, next.Token(), leader.Token())
		}
		leader = next
	}
	wantNoLeader(t, els[0], "everyone resigned")
	wantEntries(t, b, "one", 0, "everyone resigned")
}

// electionProclaim: a leader's Proclaim is seen by Leader and Observe with
// the same token, and does not hand leadership over to a waiting
// candidate.
func electionProclaim(t *testing.T, b Backend) {
	ea, eb := election(t, b.Session(t), "proclaim"), election(t, b.Session(t), "proclaim")
	o := Observe(t, eb)
	o.Await(t, distlock.LeaderInfo{})
	a := MustCampaign(t, ea, "a")
	o.Await(t, leaderInfo(a, "a"))
	rb := CampaignAsync(Ctx(t), eb, "b")
	b.WaitEntries(t, "proclaim", 2)
	for i := range 3 {
		v := fmt.Sprint("a", i)
		if err := a.Proclaim(Ctx(t), v); err != nil {
			t.Fatalf("Proclaim %q: %v", v, err)
		}
		wantLeader(t, eb, leaderInfo(a, v), "after Proclaim")
		o.Await(t, leaderInfo(a, v))
	}
	NotLeading(t, "after the leader's Proclaims", 300*time.Millisecond, rb)
	if err := a.Err(); err != nil {
		t.Fatalf("the proclaiming leader lost: %v", err)
	}
	wantEntries(t, b, "proclaim", 2, "after the Proclaims")
	MustResign(t, a)
	lb := Leads(t, rb, "b after a resigned")
	seen := o.Await(t, leaderInfo(lb, "b"))
	want := []distlock.LeaderInfo{{}, leaderInfo(a, "a"), leaderInfo(a, "a0"), leaderInfo(a, "a1"), leaderInfo(a, "a2"), leaderInfo(lb, "b")}
	if !slices.Equal(seen, want) {
		t.Fatalf("Observe saw %v, want %v", seen, want)
	}
	MustResign(t, lb)
}

// electionLeaderSessionEnds: the leader's session ends on the server; its
// Context is cancelled, it can neither Proclaim nor Resign, and the next
// candidate leads with a newer token, as Observe and Leader say.
func electionLeaderSessionEnds(t *testing.T, b Backend) {
	sa := b.Session(t)
	ea, eb := election(t, sa, "lost"), election(t, b.Session(t), "lost")
	o := Observe(t, election(t, b.Session(t), "lost"))
	o.Await(t, distlock.LeaderInfo{})
	a := MustCampaign(t, ea, "a")
	if d := a.Deadline(); !d.After(time.Now()) {
		t.Fatalf("a leader's Deadline %v is not ahead", d)
	}
	o.Await(t, leaderInfo(a, "a"))
	rb := CampaignAsync(Ctx(t), eb, "b")
	b.WaitEntries(t, "lost", 2)

	sa.End(t)
	Recv(t, a.Context().Done(), "the deposed leader's Context")
	if d := a.Deadline(); !d.IsZero() {
		t.Fatalf("a deposed leader's Deadline: %v, want the zero Time", d)
	}
	if err := a.Err(); !errors.Is(err, distlock.ErrLost) {
		t.Fatalf("deposed leader's Err: %v, want ErrLost", err)
	}
	lb := Leads(t, rb, "b after a's session ended")
	if !lb.Token().Newer(a.Token()) {
		t.Fatalf("token %v not newer than %v", lb.Token(), a.Token())
	}
	// The term is vacant from the end of a's session until b's claim:
	// observers may see "no leader" in between, and nothing else.
	seen := o.Await(t, leaderInfo(lb, "b"))
	seen = slices.DeleteFunc(seen[1:], distlock.LeaderInfo.NoLeader)
	if want := []distlock.LeaderInfo{leaderInfo(a, "a"), leaderInfo(lb, "b")}; !slices.Equal(seen, want) {
		t.Fatalf("Observe saw %v, want %v (after the first, no leader in between allowed)", seen, want)
	}
	wantNotLeader(t, a.Proclaim(Ctx(t), "stale"), "Proclaim by the deposed leader")
	wantNotLeader(t, a.Resign(Ctx(t)), "Resign by the deposed leader")
	wantLeader(t, eb, leaderInfo(lb, "b"), "after the deposed leader's calls")
	wantEntries(t, b, "lost", 1, "the deposed leader's calls touched b's entry")
	MustResign(t, lb)
}

// electionObserveOrder: Observe sends every change in order, "no leader"
// included.
func electionObserveOrder(t *testing.T, b Backend) {
	ea, eb := election(t, b.Session(t), "observe"), election(t, b.Session(t), "observe")
	o := Observe(t, election(t, b.Session(t), "observe"))
	var want []distlock.LeaderInfo
	step := func(i distlock.LeaderInfo, what string) {
		t.Helper()
		want = append(want, i)
		if seen := o.Await(t, i); !slices.Equal(seen, want) {
			t.Fatalf("%s: Observe saw %v, want %v", what, seen, want)
		}
	}
	step(distlock.LeaderInfo{}, "initial")
	a := MustCampaign(t, ea, "a")
	step(leaderInfo(a, "a"), "a leads")
	MustResign(t, a)
	step(distlock.LeaderInfo{}, "a resigned, nobody waiting")
	lb := MustCampaign(t, eb, "b")
	step(leaderInfo(lb, "b"), "b leads")
	if err := lb.Proclaim(Ctx(t), "b2"); err != nil {
		t.Fatal(err)
	}
	step(leaderInfo(lb, "b2"), "b proclaims")
	MustResign(t, lb)
	step(distlock.LeaderInfo{}, "b resigned")
	// Nothing else came after b's resignation: one more change, awaited,
	// closes the sequence, and step checks everything seen up to it (no
	// sleep to wait for the absence of an event).
	la := MustCampaign(t, ea, "a3")
	step(leaderInfo(la, "a3"), "a leads again")
	MustResign(t, la)
}

// electionCancelledCampaign: a Campaign that is cancelled or passes its
// deadline while waiting leaves no entry behind.
func electionCancelledCampaign(t *testing.T, b Backend) {
	a := MustCampaign(t, election(t, b.Session(t), "cancel"), "a")
	eb := election(t, b.Session(t), "cancel")
	ctx, cancel := context.WithCancel(context.Background())
	rb := CampaignAsync(ctx, eb, "b")
	b.WaitEntries(t, "cancel", 2)
	cancel()
	if r := Recv(t, rb, "the cancelled campaign"); !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("cancelled Campaign: %v, want context.Canceled", r.Err)
	}
	wantEntries(t, b, "cancel", 1, "after the cancelled campaign")
	dctx, dcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer dcancel()
	if _, err := eb.Campaign(dctx, "b"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign past its deadline: %v, want DeadlineExceeded", err)
	}
	wantEntries(t, b, "cancel", 1, "after the campaign past its deadline")
	MustResign(t, a)
	wantEntries(t, b, "cancel", 0, "after the resign")
}

// electionAndMutex: an Election and a Mutex of the same name are separate
// queues: a held lock does not block a Campaign, a leader does not block a
// Lock, and Leader reports the candidate, never the lock's holder.
func electionAndMutex(t *testing.T, b Backend) {
	s := b.Session(t)
	m := mutex(t, s, "both")
	e := election(t, b.Session(t), "both")
	held := MustLock(t, m)
	wantNoLeader(t, e, "with the lock held")
	l := MustCampaign(t, e, "v")
	wantLeader(t, e, leaderInfo(l, "v"), "beside the lock's holder")
	MustUnlock(t, held)
	held, err := m.TryLock(Ctx(t))
	if err != nil {
		t.Fatalf("TryLock beside a leader: %v", err)
	}
	wantEntries(t, b, "both", 2, "a leader and a holder")
	// A waiter of each kind waits for its own kind only.
	rl := LockAsync(Ctx(t), mutex(t, b.Session(t), "both"))
	rc := CampaignAsync(Ctx(t), election(t, b.Session(t), "both"), "w")
	b.WaitEntries(t, "both", 4)
	MustResign(t, l)
	w := Leads(t, rc, "the waiting candidate")
	notYet(t, "the waiting Lock after the leader resigned", rl)
	MustUnlock(t, held)
	MustUnlock(t, Successor(t, rl, held.Token(), "the waiting Lock"))
	MustResign(t, w)
	wantEntries(t, b, "both", 0, "all gone")
}

// electionRunAsLeader: RunAsLeader with several workers whose leader's
// session is ended over and over. Each worker's fn ignores its context: it
// writes through one fencing.Memory fence until the fence refuses it. The
// admitted writes never go back in token order, every deposed leader is
// refused, and at least three leaders wrote.
func electionRunAsLeader(t *testing.T, b Backend) {
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
	wrote := make(chan distlock.Token, 100)    // a term's first admitted write
	refusals := make(chan distlock.Token, 100) // a deposed leader refused
	stop := make(chan struct{})                // ends the fns, which ignore their context
	ctx, cancel := context.WithCancel(Ctx(t))
	defer cancel()
	sessions := make([]Session, workers)
	done := make(chan error, workers)
	for i := range workers {
		sessions[i] = b.Session(t)
		e := election(t, sessions[i], "worker")
		go func() {
			done <- distlock.RunAsLeader(ctx, e, fmt.Sprint("w", i), func(_ context.Context, tok distlock.Token) error {
				terms <- term{worker: i, token: tok}
				for n := 0; ; n++ {
					err := fence.Do(context.Background(), tok, func(context.Context) error {
						mu.Lock()
						ledger = append(ledger, tok.Seq)
						mu.Unlock()
						return nil
					})
					if err != nil {
						if errors.Is(err, fencing.ErrStale) {
							mu.Lock()
							refused++
							mu.Unlock()
							refusals <- tok
						}
						return err
					}
					if n == 0 {
						wrote <- tok
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
	for k := 0; ; k++ {
		tm := Recv(t, terms, "a leader's term")
		if _, ok := leaders[tm.token.Seq]; ok {
			t.Fatalf("token %v led twice", tm.token)
		}
		leaders[tm.token.Seq] = tm.worker
		// The new leader has written before its session is ended: its
		// predecessor's next write is then refused.
		for Recv(t, wrote, "the leader's first write") != tm.token {
		}
		if k == kills {
			break
		}
		sessions[tm.worker].End(t)
	}
	// Each deposed leader goes on writing until the fence refuses it.
	for range kills {
		Recv(t, refusals, "a deposed leader's refusal")
	}
	close(stop)
	cancel()
	for range workers {
		if err := Recv(t, done, "RunAsLeader's return"); !errors.Is(err, context.Canceled) {
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
	if refused < kills {
		t.Fatalf("%d stale writes refused, want at least %d (one per deposed leader)", refused, kills)
	}
	t.Logf("%d admitted writes by %d leaders (%v), %d stale writes refused", len(ledger), len(distinct), leaders, refused)
}
