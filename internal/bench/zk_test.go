package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
)

// BenchmarkCompareZooKeeper compares recipe.Mutex with go-zookeeper's
// zk.Lock on one 3-server ZooKeeper ensemble (real server processes, run by
// the integration harness), in one run:
//
//	go test . -run '^$' -bench BenchmarkCompareZooKeeper -benchtime 1x -timeout 20m
//
// Like BenchmarkCompare it runs once whatever b.N. It prints a markdown
// table (also written to $BENCH_OUT_ZK, if set); -v adds progress on
// stderr.
func BenchmarkCompareZooKeeper(b *testing.B) {
	out := os.Getenv("BENCH_OUT_ZK")
	if out != "" {
		abs, err := filepath.Abs(out)
		if err != nil {
			b.Fatal(err)
		}
		out = abs
	}
	began := time.Now()
	ens := integration.NewZooKeeper(b, integration.WithSize(3))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := &zkEnv{ens: ens, progress: func(format string, args ...any) {
		if testing.Verbose() {
			fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
		}
	}}
	var err error
	if e.leader, err = ens.Leader(ctx); err != nil {
		b.Fatal(err)
	}
	obs, _, err := e.connect(ctx, e.leader)
	if err != nil {
		b.Fatal(err)
	}
	e.observer = obs
	e.progress("ensemble up in %v, leader is server %d", time.Since(began).Round(time.Millisecond), e.leader)

	r := &zkReport{started: began, leader: e.leader,
		contended: map[int][2]*contendedResult{}, contendedReqs: map[int][2]int{}, queued: map[int][2]*zkQueuedResult{}}
	r.uncontended = e.runUncontended()
	turn := 0
	order := func() [2]int {
		turn++
		if turn%2 == 1 {
			return [2]int{ours, theirs}
		}
		return [2]int{theirs, ours}
	}
	for _, n := range zkContendedCounts {
		var (
			pair [2]*contendedResult
			reqs [2]int
		)
		for _, i := range order() {
			pair[i], reqs[i] = e.runContended(zkImpls[i], n)
		}
		r.contended[n], r.contendedReqs[n] = pair, reqs
	}
	for _, n := range zkQueuedDepths {
		if n == zkQueuedDepths[len(zkQueuedDepths)-1] && time.Since(began) > zkDeepBudget {
			e.progress("skipping %d queued: %v spent already", n, time.Since(began).Round(time.Second))
			break
		}
		var pair [2]*zkQueuedResult
		for _, i := range order() {
			pair[i] = e.runQueued(zkImpls[i], n)
		}
		r.queued[n] = pair
		r.depths = append(r.depths, n)
	}
	if r.leftover, err = e.leftoverNodes(); err != nil {
		r.leftoverErr = err
	}
	obs.Close()
	r.elapsed = time.Since(began)
	// The harness's own goroutines (proxies, relays) run until the ensemble
	// is closed, after the benchmark, so only zklock's and go-zookeeper's
	// count.
	r.stray = strayGoroutines(func(g string) bool {
		return strings.Contains(g, "github.com/distlock/distlock/zklock") || strings.Contains(g, "github.com/go-zookeeper/zk.")
	})

	emit(b, r.records()...)
	table := r.markdown()
	fmt.Println(table)
	fmt.Println(r.details())
	if out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			b.Error(err)
		}
	}
	for i, suffix := range [2]string{"ours", "theirs"} {
		b.ReportMetric(float64(summarize(r.contended[2][i].handoffs).p50)/1e6, "handoff2-p50-ms-"+suffix)
		b.ReportMetric(r.contended[2][i].perSecond(), "acq/s-2-"+suffix)
	}
}

type zkReport struct {
	started     time.Time
	elapsed     time.Duration
	leader      int
	uncontended [2]*zkUncontendedResult
	contended   map[int][2]*contendedResult
	// contendedReqs: requests written in the window, keepalives excluded.
	contendedReqs map[int][2]int
	queued        map[int][2]*zkQueuedResult
	depths        []int          // the queue depths that ran
	leftover      map[string]int // lock nodes left once everything was closed
	leftoverErr   error
	stray         []string
}

// pairRow compares two numbers where higher is better unless noted.
func pairRow(metric, format string, o, t float64) row {
	return row{metric: metric, ours: fmt.Sprintf(format, o), theirs: fmt.Sprintf(format, t), ratio: ratio(o, t)}
}

func (r *zkReport) rows() []row {
	var rows []row
	u := r.uncontended
	cr, cratio := latencyRow("Uncontended Lock+Unlock p50", u[ours].cycle, u[theirs].cycle, p50)
	cr.target, cr.met = "≤ 1.05× theirs", check(cratio <= 1.05, cratio > 0)
	c99, _ := latencyRow("Uncontended Lock+Unlock p99", u[ours].cycle, u[theirs].cycle, p99)
	lr, _ := latencyRow("Uncontended Lock p50", u[ours].lock, u[theirs].lock, p50)
	ur, _ := latencyRow("Uncontended Unlock p50", u[ours].unlock, u[theirs].unlock, p50)
	rows = append(rows, cr, c99, lr, ur)

	c2 := r.contended[2]
	hr, hratio := latencyRow("Handoff p50, 2 contenders", c2[ours].handoffs, c2[theirs].handoffs, p50)
	hr.target, hr.met = "≤ 1.0× theirs", check(hratio <= 1.0, hratio > 0)
	h99, _ := latencyRow("Handoff p99, 2 contenders", c2[ours].handoffs, c2[theirs].handoffs, p99)
	rows = append(rows, hr, h99)
	for _, n := range zkContendedCounts {
		c := r.contended[n]
		rows = append(rows, pairRow(fmt.Sprintf("Acquisitions/s, %d contenders", n), "%.0f", c[ours].perSecond(), c[theirs].perSecond()))
	}
	for _, n := range zkContendedCounts {
		c, q := r.contended[n], r.contendedReqs[n]
		rows = append(rows, pairRow(fmt.Sprintf("Requests per acquisition, %d contenders", n), "%.2f",
			perAcq(q[ours], c[ours].acquisitions), perAcq(q[theirs], c[theirs].acquisitions)))
	}

	for _, n := range r.depths {
		q := r.queued[n]
		x := pairRow(fmt.Sprintf("Bytes received per handoff, %d waiters queued (all connections, first %d handoffs)", n, q[ours].k),
			"%.0f", q[ours].bytesPerHandoff(), q[theirs].bytesPerHandoff())
		if n == 500 {
			o, t := q[ours].bytesPerHandoff(), q[theirs].bytesPerHandoff()
			x.target, x.met = "≤ 0.1× theirs", check(o/t <= 0.1, o > 0 && t > 0)
		}
		rows = append(rows, x)
	}
	for _, n := range r.depths {
		q := r.queued[n]
		rows = append(rows, pairRow(fmt.Sprintf("Bytes received per handoff, %d waiters queued (all connections, whole drain)", n),
			"%.0f", q[ours].drainBytesPerHandoff(), q[theirs].drainBytesPerHandoff()))
	}
	// Flatness: the first K handoffs of the two deepest queues (same K),
	// and the whole drain of each (where every handoff of the queue counts).
	if len(r.depths) >= 2 {
		mid, deep := r.depths[len(r.depths)-2], r.depths[len(r.depths)-1]
		flat := func(metric string, get func(*zkQueuedResult) float64) row {
			x := row{metric: metric}
			var v [2]float64
			for i := range zkImpls {
				d, s := get(r.queued[deep][i]), get(r.queued[mid][i])
				str := "n/a"
				if d > 0 && s > 0 {
					v[i] = d / s
					str = fmt.Sprintf("%.2f×", v[i])
				}
				if i == ours {
					x.ours = str
				} else {
					x.theirs = str
				}
			}
			x.target, x.met = "≤ 1.1× (ours: flat)", check(v[ours] <= 1.1, v[ours] > 0)
			return x
		}
		rows = append(rows,
			flat(fmt.Sprintf("Bytes per handoff, first %d handoffs: %d queued ÷ %d queued", zkQueuedHandoffs, deep, mid), (*zkQueuedResult).bytesPerHandoff),
			flat(fmt.Sprintf("Bytes per handoff, whole drain: %d queued ÷ %d queued", deep, mid), (*zkQueuedResult).drainBytesPerHandoff))
	}
	for _, n := range r.depths {
		q := r.queued[n]
		rows = append(rows, pairRow(fmt.Sprintf("Requests per handoff, %d waiters queued (all connections, whole drain)", n), "%.2f",
			perAcq(q[ours].dReqs, q[ours].drained), perAcq(q[theirs].dReqs, q[theirs].drained)))
	}
	for _, n := range r.depths {
		q := r.queued[n]
		x := pairRow(fmt.Sprintf("Time to queue %d waiters, ms (Lock calls started → the last reply or event before the queue goes quiet)", n), "%.0f",
			msFloat(q[ours].build), msFloat(q[theirs].build))
		if n >= 100 {
			o, t := q[ours].build, q[theirs].build
			x.target, x.met = "≤ 1.0× theirs", check(o <= t, o > 0 && t > 0)
		}
		rows = append(rows, x)
	}
	for _, n := range r.depths {
		q := r.queued[n]
		hr, _ := latencyRow(fmt.Sprintf("Handoff p50, %d waiters queued (first %d handoffs)", n, q[ours].k), q[ours].handoffs, q[theirs].handoffs, p50)
		rows = append(rows, hr)
	}
	if len(r.depths) > 0 {
		deep := r.depths[len(r.depths)-1]
		q := r.queued[deep]
		rows = append(rows, pairRow(fmt.Sprintf("Handoffs/s, first %d handoffs of %d queued", q[ours].k, deep), "%.0f", q[ours].kRate(), q[theirs].kRate()))
		metric := fmt.Sprintf("Queue-drain handoffs/s, %d queued (whole queue)", deep)
		if q[ours].partial || q[theirs].partial {
			metric += fmt.Sprintf(" (not drained within %v: handoffs done ÷ %v)", zkQueuedTimeout, zkQueuedTimeout)
		}
		x := pairRow(metric, "%.0f", q[ours].drainRate(), q[theirs].drainRate())
		o, t := q[ours].drainRate(), q[theirs].drainRate()
		x.target, x.met = "≥ 1.2× theirs", check(o/t >= 1.2, o > 0 && t > 0)
		rows = append(rows, x)
	}
	return rows
}

func (r *zkReport) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "| Measurement | %s (ours) | %s (theirs) | ours ÷ theirs | Target | Met |\n", zkImpls[ours].name, zkImpls[theirs].name)
	b.WriteString("|---|---:|---:|---:|---|:-:|\n")
	for _, x := range r.rows() {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", x.metric, x.ours, x.theirs, x.ratio, x.target, x.met)
	}
	u := r.uncontended[ours]
	c := r.contended
	depths := make([]string, len(r.depths))
	for i, n := range r.depths {
		depths[i] = fmt.Sprint(n)
	}
	fmt.Fprintf(&b, `
Both locks ran on the same 3-server ZooKeeper ensemble (server processes started by the integration harness, clients reaching them through its loopback proxies), in one run on %s: %s/%s, Go %s, GOMAXPROCS=%d, %d CPUs; the whole run took %s. Cases alternate which implementation goes first. Every contender has its own *zk.Conn (its own ZooKeeper session, %v timeout, dialed to one server, round-robin), and for zklock its own Session. Percentiles are nearest-rank. Targets are reported, never enforced. Ratios are ours ÷ theirs: lower is better for latencies and bytes, higher for rates.

- **Uncontended**: %d Lock+Unlock cycles each, interleaved, one connection each, both to the same follower (server %d; the leader is server %d); Lock, Unlock and the cycle timed on the same calls.
- **Handoff**: time from the holder's Unlock call to the next holder's Lock return, counted only when the next holder was already waiting: its Lock call had started, and written its first request (the create), before the Unlock started. Contenders lock and unlock in a loop with no work in between, for %v. Handoffs sampled (ours/theirs): %d/%d. Acquisitions/s: Lock calls returned within the window ÷ window.
- **Queued**: N waiters (N = %s), each with its own connection and Lock call, enqueue behind a holder; once all N nodes exist and no connection has received anything but pings for %v, the holder unlocks and each waiter unlocks as soon as it acquires, until the queue is empty. Bytes are everything all N+1 connections read from their sockets (wrapped through zk.WithDialer) from the release until the K-th holder's Lock returned, keepalives (ping and Sync replies) excluded, ÷ K (K = %d, or N when smaller); "whole drain" is the same from the release until the queue was empty, ÷ N. Queue-drain handoffs/s: N ÷ (release → last Lock return). Flatness compares the two deepest queues, whose first K handoffs are the same K; the whole drain shows what the first K hide when a waiter's cost grows with the handoffs since it enqueued rather than with the queue's length.
- **Requests**: every request a connection wrote (one frame per write), pings and Syncs excluded; per acquisition over the contended window, per handoff over the whole drain.
`, r.started.UTC().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(),
		r.elapsed.Round(time.Second), sessionTTL, len(u.cycle), u.server, r.leader, contendedWindow,
		len(c[2][ours].handoffs), len(c[2][theirs].handoffs), strings.Join(depths, ", "), zkQueuedQuiet, zkQueuedHandoffs)
	if len(r.leftover) > 0 || r.leftoverErr != nil {
		fmt.Fprintf(&b, "- **Lock nodes left behind** once every session and connection was closed: %v %v\n", r.leftover, r.leftoverErr)
	}
	return b.String()
}

func (r *zkReport) details() string {
	var b strings.Builder
	b.WriteString("Details\n")
	for i, im := range zkImpls {
		u := r.uncontended[i]
		fmt.Fprintf(&b, "uncontended %s: cycle %v | lock %v | unlock %v | errors %v\n", im.name, summarize(u.cycle), summarize(u.lock), summarize(u.unlock), &u.errs)
	}
	for _, n := range zkContendedCounts {
		for i, im := range zkImpls {
			c := r.contended[n][i]
			fmt.Fprintf(&b, "contended-%d %s: %d acquisitions in %v (%.1f/s) | handoffs %v, %d raced | leftover nodes %d | violations %d %q | errors %v\n",
				n, im.name, c.acquisitions, c.elapsed.Round(time.Millisecond), c.perSecond(), summarize(c.handoffs), c.raced,
				c.leftover, len(c.violations), firstN(c.violations, 3), &c.errs)
		}
	}
	for _, n := range r.depths {
		for i, im := range zkImpls {
			q := r.queued[n][i]
			fmt.Fprintf(&b, "queued-%d %s: enqueue %v, settle %v | first %d handoffs: %d B (%.0f/handoff), %d requests, %d watch events (%.2f/handoff), %v (%.0f/s), handoffs %v | drained %d in %v (%.0f/s), %d B (%.0f/handoff), %d requests, %d keepalive Syncs | leftover nodes %d | violations %d %q | errors %v\n",
				n, im.name, q.enqueue.Round(time.Millisecond), q.settle.Round(time.Millisecond), q.k, q.kBytes, q.bytesPerHandoff(), q.kReqs,
				q.kEvents, perAcq(int(q.kEvents), q.k), q.kElapsed.Round(time.Millisecond), q.kRate(), summarize(q.handoffs),
				q.drained, q.drainTime.Round(time.Millisecond), q.drainRate(), q.dBytes, q.drainBytesPerHandoff(), q.dReqs, q.dSyncs, q.leftover, len(q.violation), firstN(q.violation, 3), &q.errs)
		}
	}
	fmt.Fprintf(&b, "lock nodes left under %s and %s at the end: %v (err %v)\n", zkOursPrefix, zkTheirsPrefix, r.leftover, r.leftoverErr)
	fmt.Fprintf(&b, "goroutines of zklock or go-zookeeper still running after every session and connection was closed: %d\n", len(r.stray))
	for _, g := range firstN(r.stray, 5) {
		fmt.Fprintf(&b, "%s\n\n", g)
	}
	return b.String()
}
