package bench

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"
)

var (
	contendedCounts = pick([]int{2, 8, 32}, []int{2, 8})
	queuedDepths    = pick([]int{10, 100, 1000}, []int{10, 100})
)

// deepest is the deepest queue the run measures.
func deepest() int { return queuedDepths[len(queuedDepths)-1] }

// report is everything one run measured, each result indexed by ours and
// theirs.
type report struct {
	started     time.Time
	elapsed     time.Duration
	leader      int
	verifying   bool // etcd's ETCD_VERIFY checks were left on
	uncontended [2]*uncontendedResult
	contended   map[int][2]*contendedResult
	queued      map[int][2]*queuedResult
	stray       []string // goroutines of either library still running at the end
	elections   []string // cases during which a leader election happened
}

// row is one line of the table. Ratios are always ours ÷ theirs: lower is
// better for latencies, higher for throughput.
type row struct {
	metric, ours, theirs, ratio, target, met string
}

func ratio(o, t float64) string {
	if o == 0 || t == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", o/t)
}

func check(ok, known bool) string {
	switch {
	case !known:
		return "✗ (no data)"
	case ok:
		return "✓"
	}
	return "✗"
}

func msOrNA(d time.Duration, n int) string {
	if n == 0 {
		return "n/a"
	}
	return ms(d)
}

// latencyRow compares a percentile of two samples.
func latencyRow(metric string, o, t []time.Duration, pick func(latency) time.Duration) (row, float64) {
	lo, lt := summarize(o), summarize(t)
	r := row{metric: metric, ours: msOrNA(pick(lo), lo.n), theirs: msOrNA(pick(lt), lt.n),
		ratio: ratio(float64(pick(lo)), float64(pick(lt)))}
	if lo.n == 0 || lt.n == 0 {
		return r, 0
	}
	return r, float64(pick(lo)) / float64(pick(lt))
}

func p50(l latency) time.Duration { return l.p50 }
func p99(l latency) time.Duration { return l.p99 }

func perAcq(n, acqs int) float64 {
	if acqs == 0 {
		return 0
	}
	return float64(n) / float64(acqs)
}

func (r *report) rows() []row {
	var rows []row
	u := r.uncontended

	lockRow, lockRatio := latencyRow("Uncontended Lock p50", u[ours].lock, u[theirs].lock, p50)
	lockRow.target, lockRow.met = "≤ 1.05× theirs", check(lockRatio <= 1.05, lockRatio > 0)
	rows = append(rows, lockRow)
	lr, _ := latencyRow("Uncontended Lock p99", u[ours].lock, u[theirs].lock, p99)
	ur, _ := latencyRow("Uncontended Unlock p50", u[ours].unlock, u[theirs].unlock, p50)
	ur99, _ := latencyRow("Uncontended Unlock p99", u[ours].unlock, u[theirs].unlock, p99)
	rows = append(rows, lr, ur, ur99)
	ownUnlock := [2]time.Duration{summarize(u[ours].unlock).p50, summarize(u[theirs].unlock).p50}

	for _, n := range []int{2, 8} {
		c := r.contended[n]
		hr, hratio := latencyRow(fmt.Sprintf("Handoff p50, %d contenders", n), c[ours].handoffs, c[theirs].handoffs, p50)
		hr.target, hr.met = "≤ 0.15× theirs", check(hratio <= 0.15, hratio > 0)
		rows = append(rows, hr)

		// The handoff against the same implementation's plain Unlock: how
		// much the release costs beyond its own write.
		rel := row{metric: fmt.Sprintf("Handoff p50, %d contenders ÷ own uncontended Unlock p50", n), ratio: ""}
		var relOurs float64
		for i, d := range ownUnlock {
			h := summarize(c[i].handoffs)
			s := "n/a"
			if h.n > 0 && d > 0 {
				v := float64(h.p50) / float64(d)
				s = fmt.Sprintf("%.2f×", v)
				if i == ours {
					relOurs = v
				}
			}
			if i == ours {
				rel.ours = s
			} else {
				rel.theirs = s
			}
		}
		rel.target, rel.met = "≤ 1.6× (ours)", check(relOurs <= 1.6, relOurs > 0)
		rows = append(rows, rel)

		h99, _ := latencyRow(fmt.Sprintf("Handoff p99, %d contenders", n), c[ours].handoffs, c[theirs].handoffs, p99)
		rows = append(rows, h99)
	}

	for _, n := range contendedCounts {
		c := r.contended[n]
		o, t := c[ours].perSecond(), c[theirs].perSecond()
		tr := row{metric: fmt.Sprintf("Acquisitions/s, %d contenders", n),
			ours: fmt.Sprintf("%.0f", o), theirs: fmt.Sprintf("%.1f", t), ratio: ratio(o, t)}
		if n == 2 {
			tr.target, tr.met = "≥ 10× theirs", check(t > 0 && o/t >= 10, o > 0 && t > 0)
		}
		rows = append(rows, tr)
	}

	for _, n := range queuedDepths {
		q := r.queued[n]
		qr, _ := latencyRow(fmt.Sprintf("Handoff p50, %d waiters queued", n), q[ours].handoffs, q[theirs].handoffs, p50)
		rows = append(rows, qr)
	}
	depth := row{metric: fmt.Sprintf("Handoff p50 at %d queued ÷ at %d queued", deepest(), queuedDepths[0])}
	var depthOurs float64
	for i := range impls {
		deep, shallow := summarize(r.queued[deepest()][i].handoffs), summarize(r.queued[queuedDepths[0]][i].handoffs)
		s := "n/a"
		if deep.n > 0 && shallow.n > 0 {
			v := float64(deep.p50) / float64(shallow.p50)
			s = fmt.Sprintf("%.2f×", v)
			if i == ours {
				depthOurs = v
			}
		}
		if i == ours {
			depth.ours = s
		} else {
			depth.theirs = s
		}
	}
	depth.target, depth.met = "≤ 1.5× (ours)", check(depthOurs <= 1.5, depthOurs > 0)
	rows = append(rows, depth)

	// Requests, from the 2-contender run.
	c2 := r.contended[2]
	perAcqRow := func(metric string, get func(reqCount) int) row {
		o := perAcq(get(c2[ours].total), c2[ours].acquisitions)
		t := perAcq(get(c2[theirs].total), c2[theirs].acquisitions)
		return row{metric: metric, ours: fmt.Sprintf("%.2f", o), theirs: fmt.Sprintf("%.2f", t), ratio: ratio(o, t)}
	}
	perHandoffRow := func(metric string, get func(reqCount) int) (row, float64, bool) {
		no, nt := len(c2[ours].handoffs), len(c2[theirs].handoffs)
		o, t := perAcq(get(c2[ours].critical.count), no), perAcq(get(c2[theirs].critical.count), nt)
		return row{metric: metric, ours: fmt.Sprintf("%.2f", o), theirs: fmt.Sprintf("%.2f", t), ratio: ratio(o, t)}, o, no > 0
	}
	writes := func(c reqCount) int { return c.writes }
	reads := func(c reqCount) int { return c.reads }
	creates := func(c reqCount) int { return c.watchCreates }
	rows = append(rows,
		perAcqRow("KV writes (Txn/Put/DeleteRange) per acquisition, 2 contenders", writes),
		perAcqRow("KV reads (Range) per acquisition, 2 contenders", reads),
		perAcqRow("Watch creates per acquisition, 2 contenders", creates),
	)
	wr, w, known := perHandoffRow("Writes per handoff on the critical path, 2 contenders", writes)
	wr.target, wr.met = "= 1 (ours)", check(w > 0.995 && w < 1.005, known)
	rr, _, _ := perHandoffRow("Reads per handoff on the critical path, 2 contenders", reads)
	cr, _, _ := perHandoffRow("Watch creates per handoff on the critical path, 2 contenders", creates)
	rows = append(rows, wr, rr, cr)

	// The same at other loads, compactly.
	pathRow := func(metric string, stats [2]*pathStats, handoffs [2]int) row {
		x := row{metric: metric}
		for i := range impls {
			s := "n/a"
			if n := handoffs[i]; n > 0 {
				c := stats[i].count
				s = fmt.Sprintf("%.2f / %.2f / %.2f", perAcq(c.writes, n), perAcq(c.reads, n), perAcq(c.watchCreates, n))
			}
			if i == ours {
				x.ours = s
			} else {
				x.theirs = s
			}
		}
		return x
	}
	c8 := r.contended[8]
	rows = append(rows, pathRow("Writes / reads / watch creates per handoff on the critical path, 8 contenders",
		[2]*pathStats{&c8[ours].critical, &c8[theirs].critical}, [2]int{len(c8[ours].handoffs), len(c8[theirs].handoffs)}))
	deep := r.queued[deepest()]
	rows = append(rows, pathRow(fmt.Sprintf("Writes / reads / watch creates per handoff on the critical path, %d queued", deepest()),
		[2]*pathStats{&deep[ours].critical, &deep[theirs].critical}, [2]int{len(deep[ours].handoffs), len(deep[theirs].handoffs)}))
	return rows
}

// markdown renders the table and its footnotes, ready for the README.
func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "| Measurement | %s (ours) | %s (theirs) | ours ÷ theirs | Target | Met |\n", impls[ours].name, impls[theirs].name)
	b.WriteString("|---|---:|---:|---:|---|:-:|\n")
	for _, x := range r.rows() {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", x.metric, x.ours, x.theirs, x.ratio, x.target, x.met)
	}

	u := r.uncontended[ours]
	c2 := r.contended[2]
	samples := func(n int) string {
		c := r.contended[n]
		return fmt.Sprintf("%d/%d", len(c[ours].handoffs), len(c[theirs].handoffs))
	}
	fmt.Fprintf(&b, `
Both mutexes ran on the same 3-member etcd cluster (etcd %s member processes started by the integration harness, clients reaching them over TCP through its loopback proxies), in one run on %s: %s/%s, Go %s, GOMAXPROCS=%d, %d CPUs; the whole run took %s. Cases alternate which implementation goes first. Percentiles are nearest-rank. Targets are reported, never enforced. etcd's test-only ETCD_VERIFY checks were %s. Ratios are ours ÷ theirs: lower is better for latencies, higher for acquisitions/s.

- **Uncontended**: %d Lock/Unlock cycles each, interleaved, one client each, both on the same follower (member %d; leader is member %d); each call timed on its own.
- **Handoff**: time from the holder's Unlock call to the next holder's Lock return, counted only when the next holder was already waiting: its Lock call had started, and sent its first request (the enqueue), before the Unlock started. Contenders lock and unlock in a loop with no work in between, for %v; each has its own client (round-robin over the 3 members, one endpoint per client) and its own session. Handoffs sampled (ours/theirs): %s with 2 contenders, %s with 8. Acquisitions/s come from the same runs (Lock calls returned within the window ÷ window).
- **Queued**: N waiters, each with its own session and its own Lock call, enqueue behind a holder; once all N keys are visible in etcd, every watch the waiters opened is confirmed and no request has gone out for %v, the holder unlocks and each waiter unlocks as soon as it acquires. The first %d handoffs are measured (N=%d: rounds of N until %d), then the rest are cancelled. N ≤ %d: one client per waiter; deeper queues share %d clients, round-robin over the members.
- **Requests**: counted by gRPC interceptors on every client, each retry included; keepalives and lease grant/revoke excluded. Per acquisition: all requests of the contenders in the window ÷ acquisitions (2 contenders: %d/%d acquisitions). Critical path: requests the releasing holder issued during its Unlock, plus those the next holder issued between the Unlock start and its Lock return; at %d queued, every client's requests in that interval. Watch creates are WatchCreateRequests sent on a watch stream.
`, etcdVersion, r.started.UTC().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(),
		r.elapsed.Round(time.Second), map[bool]string{false: "off", true: "on (BENCH_ETCD_VERIFY)"}[r.verifying],
		len(u.lock), u.member, r.leader,
		contendedWindow, samples(2), samples(8),
		queuedQuiet, queuedHandoffs, queuedDepths[0], queuedHandoffs, queuedMaxClients, queuedMaxClients,
		c2[ours].acquisitions, c2[theirs].acquisitions, deepest())
	if during := r.electedWhileMeasuring(); len(during) > 0 {
		fmt.Fprintf(&b, "- **A leader election happened while measuring** %s: writes stall until a new leader is in place, so those numbers are not comparable.\n", strings.Join(during, ", "))
	}
	return b.String()
}

// details is what the table leaves out: full distributions, requests by
// method, errors, leftover keys and safety checks, for whoever reads the
// run's output.
func (r *report) details() string {
	var b strings.Builder
	b.WriteString("Details\n")
	for i, im := range impls {
		u := r.uncontended[i]
		fmt.Fprintf(&b, "uncontended %s: lock %v | unlock %v | errors %v\n", im.name, summarize(u.lock), summarize(u.unlock), &u.errs)
		fmt.Fprintf(&b, "    during Lock: %s\n    during Unlock: %s\n    all requests over %d cycles: %+v\n",
			&u.lockPath, &u.unlockPath, len(u.lock), u.all)
	}
	for _, n := range contendedCounts {
		for i, im := range impls {
			c := r.contended[n][i]
			fmt.Fprintf(&b, "contended-%d %s: %d acquisitions in %v (%.1f/s) | handoffs %v, %d raced | window requests %+v | leftover keys %d | violations %d %q | errors %v\n",
				n, im.name, c.acquisitions, c.elapsed.Round(time.Millisecond), c.perSecond(), summarize(c.handoffs), c.raced, c.total,
				c.leftover, len(c.violations), firstN(c.violations, 3), &c.errs)
			fmt.Fprintf(&b, "    critical path over %d handoffs: %s\n", len(c.handoffs), &c.critical)
			fmt.Fprintf(&b, "    requests by method over the whole run: %s\n", sortedCounts(c.methods))
		}
	}
	for _, n := range queuedDepths {
		for i, im := range impls {
			q := r.queued[n][i]
			fmt.Fprintf(&b, "queued-%d %s: %d clients, %d rounds | enqueue %v | settle %v | handoffs %v | leftover keys %d | violations %d %q | errors %v\n",
				n, im.name, q.clients, q.rounds, summarize(q.enqueue), summarize(q.settle), summarize(q.handoffs), q.leftover,
				len(q.violations), firstN(q.violations, 3), &q.errs)
			fmt.Fprintf(&b, "    critical path over %d handoffs: %s\n", len(q.handoffs), &q.critical)
		}
	}
	fmt.Fprintf(&b, "leader elections during (whole cases, setup and teardown included): %q; while measuring: %q\n", r.elections, r.electedWhileMeasuring())
	fmt.Fprintf(&b, "goroutines of either library still running after every session and client was closed: %d\n", len(r.stray))
	for _, g := range firstN(r.stray, 5) {
		fmt.Fprintf(&b, "%s\n\n", g)
	}
	return b.String()
}

// electedWhileMeasuring names the runs whose measurements a leader
// election disturbed.
func (r *report) electedWhileMeasuring() []string {
	var out []string
	for _, n := range contendedCounts {
		for i, im := range impls {
			if r.contended[n][i].elected {
				out = append(out, fmt.Sprintf("%s with %d contenders", im.name, n))
			}
		}
	}
	for _, n := range queuedDepths {
		for i, im := range impls {
			if r.queued[n][i].elected {
				out = append(out, fmt.Sprintf("%s with %d queued", im.name, n))
			}
		}
	}
	return out
}

func firstN(s []string, n int) []string { return s[:min(n, len(s))] }

func sortedCounts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", strings.TrimPrefix(k, "/etcdserverpb."), m[k]))
	}
	return strings.Join(parts, " ")
}
