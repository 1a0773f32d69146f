package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// handoffRounds is how many graceful handoffs each way is timed over.
var handoffRounds = pick(20, 6)

// handoffWarmup is how many rounds of each way run first, untimed: the
// servers' first requests of a kind (ZooKeeper's JIT) are slower.
const handoffWarmup = 1

// handoffUnlocks is how many Mutex Unlocks the reference times per round.
const handoffUnlocks = 3

// handoffQuiet is how long the candidates' clients must have been silent
// (every watch they asked for confirmed, on etcd) before a timed call. It
// is longer than the 100 ms in which an etcd member moves a watch that
// starts at a past revision (concurrency.Election's does: the revision of
// its read) to the watchers it notifies at once: with 50 ms, some of
// theirs' handoffs waited for that move (50–80 ms), which a candidate
// that has waited any while never does.
const handoffQuiet = 150 * time.Millisecond

// BenchmarkElectionHandoff times the leaderless gap of a graceful handoff
// — from just before the leader's call to the successor's Campaign
// returning — on etcd (3 members) and ZooKeeper (3 servers), each way in
// the same run on the same cluster, in a new order every round:
//
//	go -C internal/bench test . -run '^$' -bench BenchmarkElectionHandoff -benchtime 1x
//	go -C internal/bench test . -run '^$' -bench 'BenchmarkElectionHandoff/etcd' -benchtime 1x
//
// The ways: ours, Leadership.HandOff(ctx, "") (one write deletes the
// leader's entry and names the successor, picked from the state the
// leader's watch last saw, in the term record); ours,
// Resign (HandOff to the next in line); ours, the Lease's plain Unlock
// (the entry goes and the term is vacant: the successor claims it with a
// write of its own, as every Resign did before HandOff); and on etcd
// theirs, concurrency.Election's Resign (the other candidate's Campaign
// returns once its watch saw the delete and a read found no older key).
// The reference is our Mutex's Unlock on the same cluster through the
// leader's client (Lock, the clients quiet, then Unlock's own round
// trip): the goal is a handoff gap p50 under 2× it.
//
// Each round uses a fresh election on long-lived sessions: the leader
// campaigns through one member (server), the successor through another,
// both followers; once the successor's entry is in and the candidates'
// clients are quiet (handoffQuiet), the leader's call is timed. One
// untimed warm-up round of every way comes first. The table also gives
// the leader's call's own round trip and the requests on the path: those
// the leader made during its call and the successor from the call's start
// to its Campaign's return. The records are bench "election", beside the
// failover's; a store's are left out if a leader election happened
// during its rounds. Like BenchmarkCompare it runs once whatever b.N; use
// -benchtime 1x.
func BenchmarkElectionHandoff(b *testing.B) {
	etcdVerify(b)
	b.Run("etcd", func(b *testing.B) { runHandoff(b, time.Now(), etcdHandoffStore(b)) })
	b.Run("zookeeper", func(b *testing.B) { runHandoff(b, time.Now(), zkHandoffStore(b)) })
}

// handoffWay is one way a leader steps down, or the reference, and what
// its rounds measured.
type handoffWay struct {
	label  string // the table's row
	impl   string // Record.Impl
	metric string // Record.Metric's stem
	// reference: the Mutex's Unlock, whose samples are its own round trips.
	reference bool
	round     func(ctx context.Context, r int) (handoffSample, error)

	gaps, calls  []time.Duration
	leader, next reqCount // summed over rounds
	syncs        int64
	rounds       int
}

// handoffSample is what one round of a way measured.
type handoffSample struct {
	gaps         []time.Duration // leader's call → successor's Campaign returns (reference: Unlock round trips)
	call         time.Duration   // the leader's call's own round trip
	leader, next reqCount        // requests on the path: the leader's during its call, the successor's until it leads
	syncs        int64           // ZooKeeper Syncs the two connections sent meanwhile
}

// handoffStore is one store's ways and how to describe its cluster.
type handoffStore struct {
	store   string // Record.Store
	cluster string // for the table's heading
	// typed: requests are told apart by kind (etcd); on ZooKeeper every
	// request but keepalives is counted in other, Syncs apart.
	typed bool
	ways  []*handoffWay
	// term is the raft term (etcd), to notice elections; 0 elsewhere.
	term func() uint64
}

// The on-paper rows: client-go's LeaderElector with Kubernetes' core
// defaults (15 s lease, 10 s renew deadline, 2 s retry period). A
// candidate tries every RetryPeriod × (1 + rand × 1.2) (wait.JitterUntil
// with JitterFactor 1.2: 2–4.4 s, mean 3.2 s). ReleaseOnCancel clears the
// holder: the next try acquires, on average E[I²]/2E[I] ≈ 1.7 s later, at
// most 4.4 s (2 s and 1 s without the jitter). Without it the lease must
// run out: 15 s after the candidate last saw a renewal (it sees one at a
// try, 0–4.4 s after the leader's last renewal, made 0–2 s before the
// leader stopped), then its next try: 13–24 s, about 17 s on average.
var clientGoRows = []string{
	"| client-go LeaderElector, ReleaseOnCancel (on paper: 2 s retry, jitter 1.2) | ≈ 1.7 s mean | | ≤ 4.4 s | | | | the next candidate's next try (1 read + 1 write) |",
	"| client-go LeaderElector, no ReleaseOnCancel (on paper: 15 s lease) | ≈ 17 s mean | | ≤ 24 s | | | | the lease runs out, then a try |",
}

// runHandoff runs st's rounds (st was set up from began on), prints its
// table and emits its records.
func runHandoff(b *testing.B, began time.Time, st *handoffStore) {
	progress := func(format string, args ...any) {
		if testing.Verbose() {
			fmt.Fprintf(os.Stderr, "bench: handoff %s: "+format+"\n", append([]any{st.store}, args...)...)
		}
	}
	progress("cluster and sessions up in %v", time.Since(began).Round(time.Millisecond))
	began = time.Now()
	var elected []string
	// Every round runs the ways in a fresh order (the same in every run),
	// so that none always follows the same other way.
	rng := rand.New(rand.NewPCG(1, 2))
	for r := range handoffWarmup + handoffRounds {
		for _, j := range rng.Perm(len(st.ways)) {
			w := st.ways[j]
			before := st.term()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			s, err := w.round(ctx, r)
			cancel()
			if err != nil {
				b.Fatalf("%s %s round %d: %v", st.store, w.label, r, err)
			}
			if r < handoffWarmup {
				progress("%s warm-up: %v (call %v)", w.label, s.gaps, s.call)
				continue
			}
			if after := st.term(); after != before {
				// Kept in the table, but said, and the store's records
				// left out: a leader election stalls writes.
				elected = append(elected, fmt.Sprintf("%s round %d (term %d → %d)", w.label, r, before, after))
			}
			w.gaps = append(w.gaps, s.gaps...)
			w.calls = append(w.calls, s.call)
			addCounts(&w.leader, s.leader)
			addCounts(&w.next, s.next)
			w.syncs += s.syncs
			w.rounds++
			progress("%s %d: %v (call %v)", w.label, r, s.gaps, s.call)
		}
	}
	progress("done in %v", time.Since(began).Round(time.Second))

	var ref, theirsWay *handoffWay
	for _, w := range st.ways {
		switch {
		case w.reference:
			ref = w
		case w.impl == "theirs":
			theirsWay = w
		}
	}
	unlock := summarize(ref.gaps)
	var t strings.Builder
	fmt.Fprintf(&t, "Election handoff (leader's call → successor's Campaign returns), %d rounds each, %s\n\n", handoffRounds, st.cluster)
	fmt.Fprintf(&t, "| way | gap p50 | gap p90 | gap max | p50 ours ÷ theirs | p50 ÷ Unlock p50 | leader's call p50 | requests on the path, per round |\n")
	fmt.Fprintf(&t, "|---|--:|--:|--:|--:|--:|--:|---|\n")
	for _, w := range st.ways {
		l := summarize(w.gaps)
		vsTheirs := ""
		if theirsWay != nil && w.impl == "ours" && !w.reference {
			vsTheirs = ratio(float64(l.p50), float64(summarize(theirsWay.gaps).p50))
		}
		call := ms(summarize(w.calls).p50)
		if w.reference {
			call = "" // its gap is the call
		}
		fmt.Fprintf(&t, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", w.label, ms(l.p50), ms(l.p90), ms(l.max),
			vsTheirs, ratio(float64(l.p50), float64(unlock.p50)), call, st.pathString(w))
	}
	for _, row := range clientGoRows {
		t.WriteString(row + "\n")
	}
	for _, w := range st.ways {
		if w.metric == "handoff" && w.impl == "ours" {
			g := summarize(w.gaps).p50
			met := "met"
			if float64(g) >= 2*float64(unlock.p50) {
				met = "NOT met"
			}
			fmt.Fprintf(&t, "\nGoal: HandOff's gap p50 under 2× our Mutex Unlock's p50: %s ÷ %s = %s, %s.\n", ms(g), ms(unlock.p50), ratio(float64(g), float64(unlock.p50)), met)
			b.ReportMetric(float64(g)/1e6, "handoff-p50-ms-ours")
		}
	}
	if theirsWay != nil {
		b.ReportMetric(float64(summarize(theirsWay.gaps).p50)/1e6, "handoff-p50-ms-theirs")
	}
	if len(elected) > 0 {
		fmt.Fprintf(&t, "\nLeader elections during: %s.\n", strings.Join(elected, "; "))
	}
	fmt.Println(t.String())
	b.Logf("%s: handoff p50 %s, Unlock p50 %s", st.store, ms(summarize(st.ways[0].gaps).p50), ms(unlock.p50))
	if len(elected) == 0 {
		emit(b, handoffRecords(st.store, st.ways, unlock.p50)...)
	}
}

func addCounts(sum *reqCount, c reqCount) {
	sum.reads += c.reads
	sum.writes += c.writes
	sum.watchCreates += c.watchCreates
	sum.watchCancels += c.watchCancels
	sum.other += c.other
}

// pathString says what requests a way's rounds made on the path, per round.
func (st *handoffStore) pathString(w *handoffWay) string {
	n := float64(max(w.rounds, 1))
	if w.reference {
		n *= handoffUnlocks
	}
	per := func(c reqCount) string {
		if !st.typed {
			return fmt.Sprintf("%.1f", float64(c.other)/n)
		}
		s := fmt.Sprintf("%.1f w + %.1f r", float64(c.writes)/n, float64(c.reads)/n)
		if x := c.watchCreates + c.watchCancels + c.other; x > 0 {
			s += fmt.Sprintf(" + %.1f other", float64(x)/n)
		}
		return s
	}
	if w.reference {
		return "Unlock: " + per(w.leader)
	}
	out := fmt.Sprintf("leader %s; successor %s", per(w.leader), per(w.next))
	if !st.typed {
		out += fmt.Sprintf("; + %.1f Syncs", float64(w.syncs)/n)
	}
	return out
}

// handoffRecords is what BenchmarkElectionHandoff emits for one store:
// bench "election" beside the failover's numbers.
func handoffRecords(store string, ways []*handoffWay, unlock time.Duration) []Record {
	o := &recs{bench: "election", store: store}
	for _, w := range ways {
		l := summarize(w.gaps)
		if l.n == 0 {
			continue
		}
		o.add(w.impl, w.metric+"_p50", 0, msFloat(l.p50), "ms")
		if w.reference {
			continue
		}
		o.add(w.impl, w.metric+"_p90", 0, msFloat(l.p90), "ms")
		o.add(w.impl, w.metric+"_max", 0, msFloat(l.max), "ms")
		o.add(w.impl, w.metric+"_call_p50", 0, msFloat(summarize(w.calls).p50), "ms")
		if unlock > 0 {
			o.add(w.impl, w.metric+"_per_unlock", 0, float64(l.p50)/float64(unlock), "count")
		}
	}
	return o.out
}

// successor is a candidate's Campaign running in the background.
type successor struct {
	*timedCampaign
	l      distlock.Leadership // ours: set before done is sent
	waited bool
	err    error
}

func campaignNext(campaign func() (distlock.Leadership, error)) *successor {
	s := &successor{}
	s.timedCampaign = campaignInBackground(func() error {
		l, err := campaign()
		s.l = l
		return err
	})
	return s
}

// wait waits for the successor's Campaign and returns its error; called
// again, it returns the same.
func (s *successor) wait(ctx context.Context) error {
	if s.waited {
		return s.err
	}
	select {
	case s.err = <-s.done:
		s.waited = true
		return s.err
	case <-ctx.Done():
		return fmt.Errorf("waiting for the successor: %w", context.Cause(ctx))
	}
}

// unlocker is a Leadership's Lease's plain Unlock: the entry deleted, the
// term left vacant.
type unlocker interface{ Unlock(context.Context) error }

// stepDown is one way a leader gives leadership up; it returns the
// successor the call itself named, if it names one.
type stepDown func(ctx context.Context, l distlock.Leadership) (distlock.LeaderInfo, error)

var (
	byHandOff stepDown = func(ctx context.Context, l distlock.Leadership) (distlock.LeaderInfo, error) {
		return l.HandOff(ctx, "")
	}
	byResign stepDown = func(ctx context.Context, l distlock.Leadership) (distlock.LeaderInfo, error) {
		return distlock.LeaderInfo{}, l.Resign(ctx)
	}
	byUnlock stepDown = func(ctx context.Context, l distlock.Leadership) (distlock.LeaderInfo, error) {
		u, ok := l.(unlocker)
		if !ok {
			return distlock.LeaderInfo{}, fmt.Errorf("%T has no Unlock", l)
		}
		return distlock.LeaderInfo{}, u.Unlock(ctx)
	}
)

// checkSuccession checks what a handoff must give: the successor leads
// with a larger token, the one the leader's call named if it named one.
func checkSuccession(lead, next distlock.Leadership, named distlock.LeaderInfo) error {
	if lt, nt := lead.Token().Seq, next.Token().Seq; nt <= lt {
		return fmt.Errorf("the successor's token %d is not above the leader's %d", nt, lt)
	}
	if !named.NoLeader() && (named.Token.Seq != next.Token().Seq || named.Value != "next") {
		return fmt.Errorf("the handoff named %q at token %d, the successor leads at %d", named.Value, named.Token.Seq, next.Token().Seq)
	}
	return nil
}

// ---- etcd ----

// etcdHandoff is the etcd cluster and the candidates' clients and
// sessions: index 0 is the leader's (on the member after the raft
// leader), 1 the successor's (the member after that).
type etcdHandoff struct {
	e      *env
	clis   [2]*clientv3.Client
	cands  *clientSet
	ours   [2]*etcdlock.Session
	theirs [2]*concurrency.Session
	mutex  *recipe.Mutex
}

func etcdHandoffStore(b *testing.B) *handoffStore {
	e := newEnv(b)
	h := &etcdHandoff{e: e, cands: &clientSet{counters: []*rpcCounter{newRPCCounter(), newRPCCounter()}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range h.clis {
		cli, err := e.client(e.leader+1+i, h.cands.counters[i])
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cli.Close() })
		h.clis[i] = cli
		s, err := etcdlock.NewSession(ctx, cli, etcdlock.WithTTL(sessionTTL))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.Close(ctx)
		})
		h.ours[i] = s
		ts, err := concurrency.NewSession(cli, concurrency.WithTTL(int(sessionTTL/time.Second)))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { ts.Close() })
		h.theirs[i] = ts
	}
	var err error
	if h.mutex, err = recipe.NewMutex(h.ours[0], "bench-handoff-unlock"); err != nil {
		b.Fatal(err)
	}
	return &handoffStore{
		store:   "etcd",
		cluster: fmt.Sprintf("etcd %s, 3 members", etcdVersion),
		typed:   true,
		term:    e.term,
		ways: []*handoffWay{
			{label: "ours: HandOff(ctx, \"\")", impl: "ours", metric: "handoff", round: h.oursRound("handoff", byHandOff)},
			{label: "ours: Resign", impl: "ours", metric: "resign", round: h.oursRound("resign", byResign)},
			{label: "ours: Unlock, then the successor's claim", impl: "ours", metric: "vacancy", round: h.oursRound("vacancy", byUnlock)},
			{label: "theirs: concurrency.Election Resign → Campaign", impl: "theirs", metric: "handoff", round: h.theirsRound},
			{label: "reference: our Mutex's Unlock", impl: "ours", metric: "mutex_unlock", reference: true, round: h.unlockRound},
		},
	}
}

// reqs is what c issued in [from, to], by kind.
func reqs(c *rpcCounter, from, to time.Time) reqCount {
	var n reqCount
	for _, ev := range c.between(from, to) {
		n.add(ev.kind)
	}
	return n
}

// settle waits until the candidates' entries are in (want keys under
// prefix) and their clients are quiet.
func (h *etcdHandoff) settle(ctx context.Context, prefix string) error {
	if err := h.e.waitKeys(ctx, prefix, 2); err != nil {
		return err
	}
	return h.cands.quiet(handoffQuiet, 10*time.Second)
}

func (h *etcdHandoff) oursRound(way string, step stepDown) func(ctx context.Context, r int) (handoffSample, error) {
	return func(ctx context.Context, r int) (s handoffSample, err error) {
		name := fmt.Sprintf("bench-handoff/%s/%d", way, r)
		var els [2]*recipe.Election
		for i := range els {
			if els[i], err = recipe.NewElection(h.ours[i], name); err != nil {
				return s, err
			}
		}
		lead, err := els[0].Campaign(ctx, "leader")
		if err != nil {
			return s, err
		}
		next := campaignNext(func() (distlock.Leadership, error) { return els[1].Campaign(ctx, "next") })
		defer func() {
			if werr := next.wait(ctx); werr == nil {
				next.l.Resign(ctx) // nobody waits: its entry goes
			}
		}()
		if err := h.settle(ctx, etcdlock.DefaultPrefix+name+"/@e"); err != nil {
			lead.Resign(ctx)
			return s, err
		}
		start := time.Now()
		named, err := step(ctx, lead)
		end := time.Now()
		if err != nil {
			return s, fmt.Errorf("leader: %w", err)
		}
		if err := next.wait(ctx); err != nil {
			return s, fmt.Errorf("successor: %w", err)
		}
		s.gaps = []time.Duration{next.at.Sub(start)}
		s.call = end.Sub(start)
		s.leader = reqs(h.cands.counters[0], start, end)
		s.next = reqs(h.cands.counters[1], start, next.at)
		return s, checkSuccession(lead, next.l, named)
	}
}

func (h *etcdHandoff) theirsRound(ctx context.Context, r int) (s handoffSample, err error) {
	prefix := fmt.Sprintf("/bench-handoff-theirs/%d", r)
	var els [2]*concurrency.Election
	for i := range els {
		els[i] = concurrency.NewElection(h.theirs[i], prefix)
	}
	if err := els[0].Campaign(ctx, "leader"); err != nil {
		return s, err
	}
	next := &successor{timedCampaign: campaignInBackground(func() error { return els[1].Campaign(ctx, "next") })}
	defer func() {
		if werr := next.wait(ctx); werr == nil {
			els[1].Resign(ctx)
		}
	}()
	if err := h.settle(ctx, prefix+"/"); err != nil {
		els[0].Resign(ctx)
		return s, err
	}
	start := time.Now()
	err = els[0].Resign(ctx)
	end := time.Now()
	if err != nil {
		return s, fmt.Errorf("leader: %w", err)
	}
	if err := next.wait(ctx); err != nil {
		return s, fmt.Errorf("successor: %w", err)
	}
	s.gaps = []time.Duration{next.at.Sub(start)}
	s.call = end.Sub(start)
	s.leader = reqs(h.cands.counters[0], start, end)
	s.next = reqs(h.cands.counters[1], start, next.at)
	return s, nil
}

// unlockRound times handoffUnlocks Unlocks of our Mutex through the
// leader's client, each once the clients are quiet after its Lock.
func (h *etcdHandoff) unlockRound(ctx context.Context, _ int) (s handoffSample, err error) {
	for range handoffUnlocks {
		l, err := h.mutex.Lock(ctx)
		if err != nil {
			return s, err
		}
		if err := h.cands.quiet(handoffQuiet, 10*time.Second); err != nil {
			l.Unlock(ctx)
			return s, err
		}
		start := time.Now()
		err = l.Unlock(ctx)
		end := time.Now()
		if err != nil {
			return s, err
		}
		s.gaps = append(s.gaps, end.Sub(start))
		s.call += end.Sub(start)
		addCounts(&s.leader, reqs(h.cands.counters[0], start, end))
	}
	return s, nil
}

// ---- ZooKeeper ----

const zkHandoffPrefix = "/bench-handoff"

// zkHandoff is the ensemble and the candidates' connections (each its own
// ZooKeeper session) and zklock sessions, index 0 the leader's, on the
// server after the ZooKeeper leader, 1 the successor's, on the one after.
type zkHandoff struct {
	z     *zkEnv
	conns [2]*zk.Conn
	ctrs  [2]*zkCounter
	ss    [2]*zklock.Session
	mutex *recipe.Mutex
}

func zkHandoffStore(b *testing.B) *handoffStore {
	z := &zkEnv{ens: integration.NewZooKeeper(quietTB{b}, integration.WithSize(3)), progress: func(string, ...any) {}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	if z.leader, err = z.ens.Leader(ctx); err != nil {
		b.Fatal(err)
	}
	obs, _, err := z.connect(ctx, z.leader)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(obs.Close)
	z.observer = obs
	h := &zkHandoff{z: z}
	for i := range h.conns {
		conn, ctr, err := z.connect(ctx, z.leader+1+i)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(conn.Close)
		h.conns[i], h.ctrs[i] = conn, ctr
		s, err := zklock.NewSession(ctx, conn, recipe.WithPrefix(zkHandoffPrefix), zklock.WithTickTime(integration.ZooKeeperTickTime))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.Close(ctx)
		})
		h.ss[i] = s
	}
	if h.mutex, err = recipe.NewMutex(h.ss[0], "unlock"); err != nil {
		b.Fatal(err)
	}
	return &handoffStore{
		store:   "zookeeper",
		cluster: "ZooKeeper, 3 servers (go-zookeeper has no election to compare with)",
		term:    func() uint64 { return 0 },
		ways: []*handoffWay{
			{label: "ours: HandOff(ctx, \"\")", impl: "ours", metric: "handoff", round: h.oursRound("handoff", byHandOff)},
			{label: "ours: Resign", impl: "ours", metric: "resign", round: h.oursRound("resign", byResign)},
			{label: "ours: Unlock, then the successor's claim", impl: "ours", metric: "vacancy", round: h.oursRound("vacancy", byUnlock)},
			{label: "reference: our Mutex's Unlock", impl: "ours", metric: "mutex_unlock", reference: true, round: h.unlockRound},
		},
	}
}

// quiet waits until neither candidate's connection has received anything
// but keepalives for handoffQuiet.
func (h *zkHandoff) quiet() error {
	_, err := zkQuiet(h.ctrs[:], handoffQuiet, 10*time.Second)
	return err
}

// waitCandidates waits until dir has want candidate nodes ("@e…").
func (h *zkHandoff) waitCandidates(ctx context.Context, dir string, want int) error {
	last := -1
	for {
		kids, _, ch, err := h.z.observer.ChildrenW(dir)
		if errors.Is(err, zk.ErrNoNode) {
			kids = nil
			_, _, ch, err = h.z.observer.ExistsW(dir)
		}
		if err != nil {
			return fmt.Errorf("waiting for %d candidates in %s: %w", want, dir, err)
		}
		last = 0
		for _, k := range kids {
			if strings.HasPrefix(k, "@e") {
				last++
			}
		}
		if last == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d candidates in %s: %d there when %w", want, dir, last, context.Cause(ctx))
		case <-ch:
		}
	}
}

func (h *zkHandoff) syncs() int64 { return h.ctrs[0].syncs.Load() + h.ctrs[1].syncs.Load() }

// zkReqs is the requests c wrote in [from, to], keepalives excluded, as
// other: ZooKeeper's are not told apart by kind here.
func zkReqs(c *zkCounter, from, to time.Time) reqCount {
	return reqCount{other: c.requests(from, to)}
}

func (h *zkHandoff) oursRound(way string, step stepDown) func(ctx context.Context, r int) (handoffSample, error) {
	return func(ctx context.Context, r int) (s handoffSample, err error) {
		name := fmt.Sprintf("%s-%d", way, r)
		var els [2]*recipe.Election
		for i := range els {
			if els[i], err = recipe.NewElection(h.ss[i], name); err != nil {
				return s, err
			}
		}
		lead, err := els[0].Campaign(ctx, "leader")
		if err != nil {
			return s, err
		}
		next := campaignNext(func() (distlock.Leadership, error) { return els[1].Campaign(ctx, "next") })
		defer func() {
			if werr := next.wait(ctx); werr == nil {
				next.l.Resign(ctx)
			}
		}()
		if err := h.waitCandidates(ctx, zkHandoffPrefix+"/"+name, 2); err != nil {
			lead.Resign(ctx)
			return s, err
		}
		if err := h.quiet(); err != nil {
			lead.Resign(ctx)
			return s, err
		}
		syncs := h.syncs()
		start := time.Now()
		named, err := step(ctx, lead)
		end := time.Now()
		if err != nil {
			return s, fmt.Errorf("leader: %w", err)
		}
		if err := next.wait(ctx); err != nil {
			return s, fmt.Errorf("successor: %w", err)
		}
		s.syncs = h.syncs() - syncs
		s.gaps = []time.Duration{next.at.Sub(start)}
		s.call = end.Sub(start)
		s.leader = zkReqs(h.ctrs[0], start, end)
		s.next = zkReqs(h.ctrs[1], start, next.at)
		return s, checkSuccession(lead, next.l, named)
	}
}

func (h *zkHandoff) unlockRound(ctx context.Context, _ int) (s handoffSample, err error) {
	for range handoffUnlocks {
		l, err := h.mutex.Lock(ctx)
		if err != nil {
			return s, err
		}
		if err := h.quiet(); err != nil {
			l.Unlock(ctx)
			return s, err
		}
		start := time.Now()
		err = l.Unlock(ctx)
		end := time.Now()
		if err != nil {
			return s, err
		}
		s.gaps = append(s.gaps, end.Sub(start))
		s.call += end.Sub(start)
		addCounts(&s.leader, zkReqs(h.ctrs[0], start, end))
	}
	return s, nil
}
