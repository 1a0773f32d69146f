package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The many-locks comparison: many clients each locking and
// unlocking names picked from a large set, so that two of them rarely want
// the same name at once. What it measures is the cost of one uncontended
// Lock+Unlock pair under load, against the store's own ceiling for the
// same writes (raw put+delete, raw create+delete) and against the anchors.

const (
	manyNames   = 1000
	manyClients = 32
	// manyOpTimeout bounds one Lock or Unlock: far above any pair's
	// latency, it only keeps a stuck call from hanging the run.
	manyOpTimeout = 30 * time.Second
)

// manyWindow is how long each implementation runs: $BENCH_MANY_WINDOW
// (a Go duration), 10s by default.
func manyWindow(tb testing.TB) time.Duration {
	v := os.Getenv("BENCH_MANY_WINDOW")
	if v == "" {
		return 10 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		tb.Fatalf("BENCH_MANY_WINDOW=%q: not a positive duration", v)
	}
	return d
}

// pairer is one client's way to take and give back name k, used by one
// goroutine: acquire(k), then release(k), repeatedly. For a lock, acquire
// is Lock and release is Unlock; for the store's ceiling, they are the
// two raw writes a lock cannot do without.
type pairer interface {
	acquire(ctx context.Context, k int) error
	release(ctx context.Context, k int) error
}

// manyImpl is one of the three contenders on one store: its pairers, one
// per client, and whether it excludes (raw writes do not, so their
// holders are not checked).
type manyImpl struct {
	impl     string // "ours", "theirs", "raw", as in Record.Impl
	name     string // as shown in the table
	excludes bool
	open     func(ctx context.Context) ([]pairer, func(), error)
}

// manyResult is what one contender did in its window.
type manyResult struct {
	impl, name string
	ops        int             // pairs that completed within the window
	window     time.Duration   // the window
	lat        []time.Duration // of those pairs
	errs       errList
	violations atomic.Int64 // times a name had two holders in this process
}

func (r *manyResult) perSecond() float64 { return float64(r.ops) / r.window.Seconds() }

// runMany has every pairer loop on names picked at random until the window
// ends, and adds the pairs that completed within it to r. A pair still
// going when the window ends is finished, not counted. Worker w's
// generator is seeded by w and round, so that every contender picks the
// same names in the same round.
func runMany(r *manyResult, ps []pairer, excludes bool, window time.Duration, round int) {
	var (
		holders [manyNames]atomic.Int32
		mu      sync.Mutex
		wg      sync.WaitGroup
	)
	end := time.Now().Add(window)
	for w, p := range ps {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(round)))
			var lat []time.Duration
			for fails := 0; time.Now().Before(end) && fails < 10; {
				k := rng.IntN(manyNames)
				t0 := time.Now()
				if err := manyPair(p, k, excludes, &holders[k], &r.violations); err != nil {
					r.errs.add(fmt.Errorf("client %d, name %d: %w", w, k, err))
					fails++ // a broken client gives up rather than spin
					continue
				}
				if t1 := time.Now(); !t1.After(end) {
					lat = append(lat, t1.Sub(t0))
				}
			}
			mu.Lock()
			r.lat = append(r.lat, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	r.window += window
	r.ops = len(r.lat)
}

// manyPair takes and gives back name k once. While p holds it, holders
// counts it: more than one holder in this process is a broken mutex.
func manyPair(p pairer, k int, excludes bool, holders *atomic.Int32, violations *atomic.Int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), manyOpTimeout)
	defer cancel()
	if err := p.acquire(ctx, k); err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	if excludes {
		if holders.Add(1) > 1 {
			violations.Add(1)
		}
		// Counted out before the release starts: from then on another
		// client may rightly get the name.
		holders.Add(-1)
	}
	if err := p.release(ctx, k); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

// BenchmarkManyLocks measures Lock+Unlock pairs on manyNames distinct names
// from manyClients clients (each with its own connection and its own
// session), spread over the members, on both stores' process clusters,
// for ours, the anchor (theirs) and the store's ceiling (raw). The
// machine is shared and its load drifts, so the contenders take turns:
// each one's window is cut into rounds, and every round runs raw, ours and
// theirs one after the other, all of their clients open throughout. Run it
// alone: `go -C internal/bench test . -run '^$' -bench BenchmarkManyLocks -benchtime 1x -v`;
// BENCH_MANY_WINDOW sets each contender's total window (10s by default),
// BENCH_MANY_ROUNDS the number of rounds (5).
func BenchmarkManyLocks(b *testing.B) {
	window := manyWindow(b)
	rounds := countFromEnv(b, "BENCH_MANY_ROUNDS", 5)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	for _, st := range []struct {
		store string
		impls func(*testing.B) ([]manyImpl, func() error)
	}{{"etcd", etcdManyImpls}, {"zookeeper", zkManyImpls}} {
		if only := os.Getenv("BENCH_MANY_STORE"); only != "" && only != st.store {
			continue
		}
		ims, stop := st.impls(b)
		pss := make([][]pairer, len(ims))
		closers := make([]func(), len(ims))
		closeAll := func() {
			for _, c := range closers {
				if c != nil {
					c()
				}
			}
		}
		rs := make([]*manyResult, len(ims))
		for i, im := range ims {
			ps, c, err := im.open(ctx)
			if err != nil {
				closeAll()
				b.Fatalf("%s %s: open %d clients: %v", st.store, im.impl, manyClients, err)
			}
			pss[i], closers[i] = ps, c
			rs[i] = &manyResult{impl: im.impl, name: im.name}
		}
		for round := range rounds {
			for i, im := range ims {
				runMany(rs[i], pss[i], im.excludes, window/time.Duration(rounds), round)
			}
		}
		closeAll()
		for _, r := range rs {
			if n := r.errs.count(); n > 0 {
				b.Errorf("%s %s: %d errors: %v", st.store, r.name, n, &r.errs)
			}
			if v := r.violations.Load(); v > 0 {
				b.Errorf("%s %s: %d times a name had two holders at once", st.store, r.name, v)
			}
		}
		if err := stop(); err != nil {
			b.Errorf("%s: stop: %v", st.store, err)
		}
		manyReport(b, st.store, rs, rounds)
	}
}

// manyReport prints the store's table and emits its Records.
func manyReport(b *testing.B, store string, rs []*manyResult, rounds int) {
	by := map[string]*manyResult{}
	var t strings.Builder
	fmt.Fprintf(&t, "\n%s: %d names, %d clients, %v per contender in %d rounds\n\n", store, manyNames, manyClients, rs[0].window, rounds)
	t.WriteString("| contender | pairs/s | p50 | p99 | errors |\n|---|---|---|---|---|\n")
	for _, r := range rs {
		by[r.impl] = r
		l := summarize(r.lat)
		fmt.Fprintf(&t, "| %s (%s) | %.0f | %s | %s | %d |\n", r.name, r.impl, r.perSecond(), msOrNA(l.p50, l.n), msOrNA(l.p99, l.n), r.errs.count())
		emit(b,
			Record{Bench: "manylocks", Store: store, Impl: r.impl, Metric: "ops_per_s", X: manyNames, Value: r.perSecond(), Unit: "1/s"},
			Record{Bench: "manylocks", Store: store, Impl: r.impl, Metric: "pair_p50", X: manyNames, Value: msFloat(l.p50), Unit: "ms"},
			Record{Bench: "manylocks", Store: store, Impl: r.impl, Metric: "pair_p99", X: manyNames, Value: msFloat(l.p99), Unit: "ms"},
		)
		b.ReportMetric(r.perSecond(), "pairs/s-"+r.impl+"-"+store)
	}
	o, th, raw := by["ours"], by["theirs"], by["raw"]
	if o != nil && raw != nil {
		fmt.Fprintf(&t, "\nours ÷ raw: %s (target ≥ 0.90×) %s\n", ratio(o.perSecond(), raw.perSecond()),
			check(o.perSecond() >= 0.9*raw.perSecond(), o.ops > 0 && raw.ops > 0))
	}
	if o != nil && th != nil {
		fmt.Fprintf(&t, "ours ÷ theirs: %s\n", ratio(o.perSecond(), th.perSecond()))
	}
	fmt.Println(t.String())
}
