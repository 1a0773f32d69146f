package bench

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
)

// semContenders is BenchmarkSemaphore's load: this many contenders, each
// with a client (or ZooKeeper connection) and session of its own, all on
// one lock or semaphore name.
const semContenders = 32

// semPermits are the permit counts measured, each against our Mutex.
var semPermits = []int{1, 4, 16}

// semPerContender is how many acquisitions each contender makes in each
// run; $BENCH_SEM_N overrides it.
func semPerContender() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_SEM_N")); err == nil && n > 0 {
		return n
	}
	return pick(40, 10)
}

// semHold is how long each holder keeps its permit: none (an empty
// critical section) unless $BENCH_SEM_HOLD says otherwise (a duration,
// e.g. 20ms), to see how far N lets holders overlap.
func semHold(b *testing.B) time.Duration {
	v := os.Getenv("BENCH_SEM_HOLD")
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		b.Fatalf("BENCH_SEM_HOLD=%q: want a duration", v)
	}
	return d
}

// semLocker is one contender: acquire returns the permit's (or the
// Mutex lease's) token, its slot (0 for the Mutex) and its release.
type semLocker struct {
	acquire func(ctx context.Context) (seq int64, slot int, release func(context.Context) error, err error)
	close   func()
}

// semReqs is what the contenders' clients sent during a run, counted by
// the benchmark's own client hooks (counter_test.go, zk_env_test.go).
// etcd: unary requests by kind and watch creations on the watch streams
// (lease keepalives ride a stream of their own and are not counted).
// ZooKeeper: requests other than pings and Syncs, and, apart, the Syncs,
// which the counter cannot tell from zklock's keepalive Syncs (one per
// session every sixth of the session timeout): the semaphore's direct
// claim syncs once after its create.
type semReqs struct {
	writes, reads, watchCreates, watchCancels, other int            // etcd
	requests                                         int            // ZooKeeper, Syncs excluded
	syncs                                            int            // ZooKeeper, keepalives included
	methods                                          map[string]int // etcd, for -v
}

// total is the requests per acquisition the table shows: every request
// counted, Syncs excluded (ZooKeeper's are shown apart).
func (q semReqs) total() int {
	return q.writes + q.reads + q.watchCreates + q.watchCancels + q.other + q.requests
}

// semCounted returns the requests the contenders sent in [from, to].
type semCounted func(from, to time.Time) semReqs

// semResult is one run: acquisitions over wall time.
type semResult struct {
	backend, lock string
	n             int // permits; 1 for the Mutex
	acquisitions  int
	elapsed       time.Duration
	slotsUsed     int // how many distinct slots were granted
	reqs          semReqs
}

func (r semResult) perSecond() float64 { return float64(r.acquisitions) / r.elapsed.Seconds() }

func (r semResult) label() string {
	if r.lock == "Mutex" {
		return "Mutex"
	}
	return fmt.Sprintf("Semaphore N=%d", r.n)
}

func (r semResult) perAcq(v int) float64 { return float64(v) / float64(r.acquisitions) }

// runSem runs per acquisitions on each of ls, one goroutine per contender,
// each an Acquire, an empty critical section and a Release, and checks in
// process that at most n hold at once, that each slot below n has one
// holder at a time, and that each slot's tokens grow from one holder to
// the next. The counts go down before Release is called, so a holder is
// counted only while it surely holds (from its claim's commit to its
// release's): an overlap seen here is an overlap in the store.
func runSem(backend, lock string, n int, ls []semLocker, per int, hold time.Duration, counted semCounted) (semResult, error) {
	var (
		holders atomic.Int64
		slots   = make([]atomic.Int64, n)
		lastMu  sync.Mutex
		last    = make([]int64, n)
		wg      sync.WaitGroup
		mu      sync.Mutex
		first   error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	for i, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				seq, slot, release, err := l.acquire(ctx)
				if err != nil {
					fail(fmt.Errorf("contender %d: %w", i, err))
					cancel()
					return
				}
				if h := holders.Add(1); h > int64(n) {
					fail(fmt.Errorf("contender %d: %d holders at once, at most %d allowed", i, h, n))
				}
				if slot < 0 || slot >= n {
					fail(fmt.Errorf("contender %d: slot %d of %d permits", i, slot, n))
				} else {
					if c := slots[slot].Add(1); c != 1 {
						fail(fmt.Errorf("contender %d: slot %d held by %d at once", i, slot, c))
					}
					lastMu.Lock()
					if seq <= last[slot] {
						fail(fmt.Errorf("contender %d: slot %d token %d after %d", i, slot, seq, last[slot]))
					}
					last[slot] = seq
					lastMu.Unlock()
				}
				if hold > 0 {
					time.Sleep(hold)
				}
				if slot >= 0 && slot < n {
					slots[slot].Add(-1)
				}
				holders.Add(-1)
				if err := release(ctx); err != nil {
					fail(fmt.Errorf("contender %d: release: %w", i, err))
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	end := time.Now()
	r := semResult{backend: backend, lock: lock, n: n, acquisitions: len(ls) * per, elapsed: end.Sub(start)}
	for _, t := range last {
		if t != 0 {
			r.slotsUsed++
		}
	}
	if counted != nil {
		r.reqs = counted(start, end)
	}
	return r, first
}

// BenchmarkSemaphore measures the throughput of the fair FIFO Semaphore
// at N = 1, 4 and 16 permits against our own Mutex, under 32 contenders
// each doing Acquire, an empty critical section and Release in a loop, on
// a 3-member etcd cluster and a 3-server ZooKeeper ensemble, in one run:
//
//	go -C internal/bench test . -run '^$' -bench BenchmarkSemaphore -benchtime 1x -timeout 30m
//
// (A comparison with a Curator-style semaphore, whose waiters list every
// holder on every change, has no Go implementation to run against; the
// Mutex, the same line without the slots, is the anchor.) Like
// BenchmarkRW it runs once whatever b.N, prints a table, and reports
// acquisitions per second and the ratio to the Mutex per backend and N,
// with the requests the contenders sent per acquisition. It fails if more
// than N ever held at once. $BENCH_SEM_N sets the acquisitions per
// contender; BENCH_SEM_SKIP_ZK=1 runs etcd only; BENCH_SEM_HOLD=20ms
// makes each holder keep its permit that long (then no records are
// emitted: they are the empty critical section's).
func BenchmarkSemaphore(b *testing.B) {
	etcdVerify(b)
	per, hold := semPerContender(), semHold(b)
	var results []semResult
	type variant struct {
		lock string
		n    int
	}
	variants := []variant{{"Mutex", 1}}
	for _, n := range semPermits {
		variants = append(variants, variant{"Semaphore", n})
	}
	run := func(backend string, open func(lock string, n int) ([]semLocker, semCounted)) {
		// The Mutex runs first on one backend and last on the other, so
		// that it does not always inherit the others' leftovers.
		vs := variants
		if len(results) > 0 {
			vs = make([]variant, len(variants))
			for i, v := range variants {
				vs[len(vs)-1-i] = v
			}
		}
		for _, v := range vs {
			ls, counted := open(v.lock, v.n)
			r, err := runSem(backend, v.lock, v.n, ls, per, hold, counted)
			parallel(len(ls), len(ls), func(i int) error { ls[i].close(); return nil })
			if err != nil {
				b.Fatalf("%s %s N=%d: %v", backend, v.lock, v.n, err)
			}
			results = append(results, r)
			if testing.Verbose() {
				fmt.Fprintf(os.Stderr, "bench: %s %s: %d acquisitions in %v; requests by method: %v\n",
					backend, r.label(), r.acquisitions, r.elapsed.Round(time.Millisecond), r.reqs.methods)
			}
		}
	}
	run("etcd", func(lock string, n int) ([]semLocker, semCounted) { return openEtcdSem(b, lock, n) })
	if os.Getenv("BENCH_SEM_SKIP_ZK") == "" {
		run("zookeeper", func(lock string, n int) ([]semLocker, semCounted) { return openZKSem(b, lock, n) })
	}

	// The rows go Mutex, then N ascending, whatever order they ran in.
	slices.SortStableFunc(results, func(a, b semResult) int {
		// "etcd" < "zookeeper"; "Mutex" < "Semaphore".
		return cmp.Or(cmp.Compare(a.backend, b.backend), cmp.Compare(a.lock, b.lock), cmp.Compare(a.n, b.n))
	})
	mutex := map[string]float64{}
	for _, r := range results {
		if r.lock == "Mutex" {
			mutex[r.backend] = r.perSecond()
		}
	}
	var tbl strings.Builder
	cs := "empty critical section"
	if hold > 0 {
		cs = fmt.Sprintf("each holding %v", hold)
	}
	fmt.Fprintf(&tbl, "\n%d contenders, %d acquisitions each, %s (etcd ran the rows top to bottom, ZooKeeper bottom to top)\n\n", semContenders, per, cs)
	fmt.Fprintf(&tbl, "| backend | lock | acquisitions | time | acq/s | ÷ Mutex | slots used | requests/acq | detail |\n|---|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range results {
		var which string
		if r.backend == "etcd" {
			which = fmt.Sprintf("%.2f writes, %.2f reads, %.2f watch creates", r.perAcq(r.reqs.writes), r.perAcq(r.reqs.reads), r.perAcq(r.reqs.watchCreates))
			if r.reqs.watchCancels > 0 {
				which += fmt.Sprintf(", %.2f watch cancels", r.perAcq(r.reqs.watchCancels))
			}
			if r.reqs.other > 0 {
				which += fmt.Sprintf(", %.2f other", r.perAcq(r.reqs.other))
			}
		} else {
			which = fmt.Sprintf("Syncs apart: %.2f (keepalives included)", r.perAcq(r.reqs.syncs))
		}
		fmt.Fprintf(&tbl, "| %s | %s | %d | %v | %.0f | %.2f× | %d | %.2f | %s |\n", r.backend, r.label(), r.acquisitions,
			r.elapsed.Round(time.Millisecond), r.perSecond(), r.perSecond()/mutex[r.backend], r.slotsUsed, r.perAcq(r.reqs.total()), which)
	}
	// The testing package cuts a benchmark's log after ten lines (the
	// ensemble's own take some): the table goes to stdout too.
	fmt.Println(tbl.String())
	b.Log(tbl.String())

	for _, backend := range []string{"etcd", "zookeeper"} {
		m, ok := mutex[backend]
		if !ok {
			continue
		}
		// Both are ours: the anchor is our own Mutex under the same load.
		o := &recs{bench: "semaphore", store: backend}
		for _, r := range results {
			if r.backend != backend {
				continue
			}
			if r.lock == "Mutex" {
				o.add("ours", "acq_per_s_mutex", 0, r.perSecond(), "1/s")
				o.add("ours", "requests_per_acq_mutex", 0, r.perAcq(r.reqs.total()), "count")
				b.ReportMetric(r.perSecond(), "acq/s-mutex-"+backend)
				continue
			}
			x := float64(r.n)
			o.add("ours", "acq_per_s_semaphore", x, r.perSecond(), "1/s")
			o.add("ours", "semaphore_per_mutex", x, r.perSecond()/m, "count")
			o.add("ours", "requests_per_acq_semaphore", x, r.perAcq(r.reqs.total()), "count")
			b.ReportMetric(r.perSecond(), fmt.Sprintf("acq/s-sem%d-%s", r.n, backend))
			b.ReportMetric(r.perSecond()/m, fmt.Sprintf("ratio-sem%d-%s", r.n, backend))
		}
		if hold == 0 { // a held critical section is another workload
			emit(b, o.out...)
		}
	}
}

// openEtcdSem opens semContenders contenders on BenchmarkRW's etcd
// cluster, each on a counted client of its own spread over the members,
// for the Mutex or the Semaphore of n permits.
func openEtcdSem(b *testing.B, lock string, n int) ([]semLocker, semCounted) {
	e := etcdRWEnv(b)
	ls := make([]semLocker, semContenders)
	ctrs := make([]*rpcCounter, semContenders)
	err := parallel(semContenders, semContenders, func(i int) error {
		ctrs[i] = newRPCCounter()
		cli, err := e.client(i, ctrs[i])
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := etcdlock.NewSession(ctx, cli, etcdlock.WithTTL(sessionTTL))
		if err != nil {
			cli.Close()
			return err
		}
		ls[i].close = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.Close(ctx)
			cli.Close()
		}
		if lock == "Mutex" {
			m, err := recipe.NewMutex(s, "bench-sem-mutex")
			ls[i].acquire = mutexAcquire(m.Lock)
			return err
		}
		sem, err := recipe.NewSemaphore(s, "bench-sem-"+strconv.Itoa(n), n)
		if err == nil {
			ls[i].acquire = semAcquire(sem.Acquire)
		}
		return err
	})
	if err != nil {
		b.Fatalf("etcd %s N=%d: open: %v", lock, n, err)
	}
	methods := func() map[string]int {
		out := map[string]int{}
		for _, c := range ctrs {
			for k, v := range c.methodCounts() {
				out[k] += v
			}
		}
		return out
	}
	before := methods()
	return ls, func(from, to time.Time) semReqs {
		q := semReqs{methods: methods()}
		for k, v := range before {
			if q.methods[k] -= v; q.methods[k] == 0 {
				delete(q.methods, k)
			}
		}
		for _, c := range ctrs {
			for _, ev := range c.between(from, to) {
				switch ev.kind {
				case kindWrite:
					q.writes++
				case kindRead:
					q.reads++
				case kindWatchCreate:
					q.watchCreates++
				case kindWatchCancel:
					q.watchCancels++
				case kindOther:
					q.other++
				}
			}
		}
		return q
	}
}

// openZKSem is openEtcdSem on BenchmarkRW's ZooKeeper ensemble, each
// contender on a counted connection (and ZooKeeper session) of its own.
func openZKSem(b *testing.B, lock string, n int) ([]semLocker, semCounted) {
	z := zkRWEnv(b)
	ls := make([]semLocker, semContenders)
	ctrs := make([]*zkCounter, semContenders)
	err := parallel(semContenders, semContenders, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		conn, ctr, err := z.connect(ctx, i)
		if err != nil {
			return err
		}
		ctrs[i] = ctr
		s, err := zklock.NewSession(ctx, conn, recipe.WithPrefix("/bench-sem"))
		if err != nil {
			conn.Close()
			return err
		}
		ls[i].close = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.Close(ctx)
			conn.Close()
		}
		if lock == "Mutex" {
			m, err := recipe.NewMutex(s, "mutex")
			ls[i].acquire = mutexAcquire(m.Lock)
			return err
		}
		sem, err := recipe.NewSemaphore(s, "sem-"+strconv.Itoa(n), n)
		if err == nil {
			ls[i].acquire = semAcquire(sem.Acquire)
		}
		return err
	})
	if err != nil {
		b.Fatalf("zookeeper %s N=%d: open: %v", lock, n, err)
	}
	// Syncs are counted since the connection opened, not by time: the
	// run's are those after its start.
	syncs0 := zkSyncs(ctrs)
	return ls, func(from, to time.Time) semReqs {
		return semReqs{requests: zkRequests(ctrs, from, to), syncs: int(zkSyncs(ctrs) - syncs0)}
	}
}

func mutexAcquire(lock func(context.Context) (*distlock.Lease, error)) func(context.Context) (int64, int, func(context.Context) error, error) {
	return func(ctx context.Context) (int64, int, func(context.Context) error, error) {
		l, err := lock(ctx)
		if err != nil {
			return 0, 0, nil, err
		}
		return l.Token().Seq, 0, l.Unlock, nil
	}
}

func semAcquire(acquire func(context.Context) (*distlock.Permit, error)) func(context.Context) (int64, int, func(context.Context) error, error) {
	return func(ctx context.Context) (int64, int, func(context.Context) error, error) {
		p, err := acquire(ctx)
		if err != nil {
			return 0, 0, nil, err
		}
		return p.Token().Seq, p.Slot(), p.Release, nil
	}
}

// zkRWEnv starts (once per benchmark) the 3-server ZooKeeper ensemble
// that BenchmarkRW and BenchmarkSemaphore run on.
func zkRWEnv(b *testing.B) *zkEnv {
	if rwZK == nil {
		ens := integration.NewZooKeeper(b, integration.WithSize(3))
		rwZK = &zkEnv{ens: ens, progress: func(string, ...any) {}}
		b.Cleanup(func() { rwZK = nil })
	}
	return rwZK
}
