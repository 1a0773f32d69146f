package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkFootprint measures what a waiting Lock and an open Session cost
// the process that holds them: goroutines (including the one that called
// Lock) and heap bytes, with $BENCH_FOOTPRINT_WAITERS (10,000 by default)
// Locks waiting on one held lock and $BENCH_FOOTPRINT_SESSIONS (200) Sessions
// open on one client, on the harness's process clusters (the heap is the
// client's alone, but for the harness's in-process proxies, whose buffers
// are per connection, not per waiter). A store whose waiters fail is
// reported, with what failed, and the run goes on. Run it alone:
// `go -C internal/bench test . -run '^$' -bench BenchmarkFootprint -benchtime 1x -v`.
func BenchmarkFootprint(b *testing.B) {
	footprintWaiters := countFromEnv(b, "BENCH_FOOTPRINT_WAITERS", pick(10000, 1000))
	footprintSessions := countFromEnv(b, "BENCH_FOOTPRINT_SESSIONS", 200)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	// Both stores run as processes of the harness, so that the heap
	// measured is the client's, not the servers'.
	clus := integration.NewEtcd(b)
	cli, err := clus.Client()
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	etcdSession := func() (closer, error) {
		s, err := etcdlock.NewSession(ctx, cli)
		return s, err
	}
	etcdMutex := func(s closer, name string) (distlock.Locker, error) {
		return recipe.NewMutex(s.(*etcdlock.Session), name)
	}
	etcdQueued := func(name string) (int, error) {
		resp, err := cli.Get(ctx, etcdlock.DefaultPrefix+name+"/@", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return 0, err
		}
		return int(resp.Count), nil
	}

	ens := integration.NewZooKeeper(b)
	conn, _, err := ens.Connect(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	zkSession := func() (closer, error) {
		s, err := zklock.NewSession(ctx, conn, zklock.WithTickTime(integration.ZooKeeperTickTime))
		return s, err
	}
	zkMutex := func(s closer, name string) (distlock.Locker, error) {
		return recipe.NewMutex(s.(*zklock.Session), name)
	}
	zkQueued := func(name string) (int, error) {
		// The Stat's count, not a listing: ten thousand children, listed
		// at every poll, would load the servers more than the waiters do.
		_, st, err := conn.Exists(zklock.DefaultPrefix + "/" + name)
		if err != nil || st == nil {
			return 0, err
		}
		return int(st.NumChildren), nil
	}

	stores := []struct {
		name    string
		session func() (closer, error)
		mutex   func(closer, string) (distlock.Locker, error)
		queued  func(name string) (int, error)
	}{{"etcd", etcdSession, etcdMutex, etcdQueued}, {"zookeeper", zkSession, zkMutex, zkQueued}}
	// Every store's sessions first: ten thousand waiters leave megabytes
	// that are released over the following seconds, and would count
	// against the sessions measured then (as negative heap).
	for _, st := range stores {
		sg, sh, err := sessionFootprint(ctx, st.session, footprintSessions)
		if err != nil {
			b.Errorf("%s, %d sessions: %v", st.name, footprintSessions, err)
		} else {
			b.Logf("%s: per open Session %.2f goroutines, %.1f KB heap (%d sessions)", st.name, sg, sh/1024, footprintSessions)
			b.ReportMetric(sg, "goroutines/session-"+st.name)
			b.ReportMetric(sh/1024, "KB/session-"+st.name)
			emit(b,
				Record{Bench: "footprint", Store: st.name, Impl: "ours", Metric: "heap_per_session", X: float64(footprintSessions), Value: sh, Unit: "B"},
				Record{Bench: "footprint", Store: st.name, Impl: "ours", Metric: "goroutines_per_session", X: float64(footprintSessions), Value: sg, Unit: "count"},
			)
		}
	}
	for _, st := range stores {
		w, err := waiterFootprint(ctx, st.session, st.mutex, st.queued, footprintWaiters)
		if err != nil {
			b.Errorf("%s, %d waiters on one lock: %v", st.name, footprintWaiters, err)
		} else {
			b.Logf("%s: per waiting Lock %.2f goroutines, %.1f KB heap (%d waiters; enqueued in %v, settled in %v, cancelled in %v)",
				st.name, w.goroutines, w.heap/1024, footprintWaiters, w.enqueue.Round(time.Millisecond),
				w.settle.Round(time.Millisecond), w.teardown.Round(time.Millisecond))
			b.ReportMetric(w.goroutines, "goroutines/waiter-"+st.name)
			b.ReportMetric(w.heap/1024, "KB/waiter-"+st.name)
			emit(b,
				Record{Bench: "footprint", Store: st.name, Impl: "ours", Metric: "heap_per_waiter", X: float64(footprintWaiters), Value: w.heap, Unit: "B"},
				Record{Bench: "footprint", Store: st.name, Impl: "ours", Metric: "goroutines_per_waiter", X: float64(footprintWaiters), Value: w.goroutines, Unit: "count"},
			)
		}
	}
}

// countFromEnv reads a positive count from the environment, def when unset.
func countFromEnv(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: not a positive count", name, v)
	}
	return n
}

type closer interface {
	Close(ctx context.Context) error
}

// usage returns the process's goroutines and live heap bytes.
func usage() (int, uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return runtime.NumGoroutine(), m.HeapAlloc
}

// footprintBatch is how many waiters enqueue at a time: the next batch
// starts once the store has every entry of the last one. Ten thousand
// enqueues at once would measure the client's and the servers' queueing
// (and time out), not what a waiter costs once it waits; so would a few
// hundred at once, on this many entries: each of our enqueues reads the
// whole queue (etcd sorts the range by create revision, which makes it
// ignore the limit; ZooKeeper lists every child), and 250 such reads in
// flight on 3,000 to 8,000 entries were enough to time out etcd's Txns
// and to pause ZooKeeper's servers (256 MB heaps) past their sync limit.
const footprintBatch = 32

// footprintStall is how long the queue may stay the same length while
// waiters are enqueuing, or the goroutine count may keep changing once
// they all are, before the run gives up and says so.
const footprintStall = time.Minute

// waiterCost is what waiterFootprint measured.
type waiterCost struct {
	goroutines, heap float64       // per waiter
	enqueue          time.Duration // from the first Lock call to the last entry in the store
	settle           time.Duration // from then until the goroutine count stood still
	teardown         time.Duration // from cancelling the waiters until every Lock returned
}

// waiterFootprint holds one lock and has n Locks wait on it, each from a
// goroutine of its own (counted), all on one session; it returns the
// goroutines and heap bytes per waiter once every one has enqueued and the
// process has settled (its goroutine count stands still). A Lock that
// returns before the waiters are cancelled is a failure: it says what
// broke, and when.
func waiterFootprint(ctx context.Context, session func() (closer, error), mutex func(closer, string) (distlock.Locker, error), queued func(string) (int, error), n int) (waiterCost, error) {
	var c waiterCost
	s, err := session()
	if err != nil {
		return c, fmt.Errorf("open session: %w", err)
	}
	defer s.Close(context.Background())
	name := fmt.Sprintf("footprint-%d", time.Now().UnixNano())
	m, err := mutex(s, name)
	if err != nil {
		return c, err
	}
	held, err := m.Lock(ctx)
	if err != nil {
		return c, fmt.Errorf("take the lock the waiters wait on: %w", err)
	}
	defer held.Unlock(context.Background())

	if err := settled(ctx, &errList{}); err != nil {
		return c, fmt.Errorf("before the waiters: %w", err)
	}
	g0, h0 := usage()
	wctx, stop := context.WithCancel(ctx)
	var (
		wg       sync.WaitGroup
		early    errList // Locks that returned while they should be waiting
		stopped  atomic.Bool
		launched int
	)
	cancelled := func() error {
		stopped.Store(true)
		stop()
		t := time.Now()
		if !waitTimeout(&wg, 5*time.Minute) {
			return fmt.Errorf("%d waiters cancelled, some still in Lock after 5m", launched)
		}
		c.teardown = time.Since(t)
		return nil
	}
	fail := func(err error) (waiterCost, error) {
		if cerr := cancelled(); cerr != nil {
			err = fmt.Errorf("%w; and then: %v", err, cerr)
		}
		return c, err
	}
	start := time.Now()
	for launched < n {
		batch := min(footprintBatch, n-launched)
		for range batch {
			wg.Go(func() {
				l, err := m.Lock(wctx)
				if err == nil {
					err = errors.New("Lock returned the lock while it was held")
					l.Unlock(context.Background())
				}
				if !stopped.Load() {
					early.add(err)
				}
			})
		}
		launched += batch
		if err := waitQueued(ctx, name, queued, launched+1, &early); err != nil {
			return fail(fmt.Errorf("after %v, %d of %d waiters started: %w", time.Since(start).Round(time.Millisecond), launched, n, err))
		}
		if launched%2000 == 0 || launched == n {
			footprintProgress("footprint: %d of %d waiters enqueued after %v", launched, n, time.Since(start).Round(time.Millisecond))
		}
	}
	c.enqueue = time.Since(start)
	t := time.Now()
	if err := settled(ctx, &early); err != nil {
		return fail(fmt.Errorf("%d waiters enqueued: %w", n, err))
	}
	c.settle = time.Since(t)
	g1, h1 := usage()
	if err := cancelled(); err != nil {
		return c, err
	}
	c.goroutines = float64(g1-g0) / float64(n)
	c.heap = float64(int64(h1)-int64(h0)) / float64(n)
	return c, nil
}

// waitQueued polls until the lock's queue has want entries. It fails when
// a waiter has failed, when ctx ends, or when the queue has not grown for
// footprintStall. A failed count is retried: the observer's connection
// may drop (a ZooKeeper leader election) while the waiters' sessions
// survive, and it is their failures that count.
func waitQueued(ctx context.Context, name string, queued func(string) (int, error), want int, early *errList) error {
	last, grew := -1, time.Now()
	var countErr error
	for {
		if early.count() > 0 {
			return fmt.Errorf("Locks failed while waiting (%d entries queued at the last count; last count error: %v): %v", max(last, 0), countErr, early)
		}
		q, err := queued(name)
		switch {
		case err != nil:
			countErr = fmt.Errorf("count the queue: %w", err)
		case q >= want:
			return nil
		case q != last:
			last, grew = q, time.Now()
		}
		if time.Since(grew) > footprintStall {
			return fmt.Errorf("queue stuck at %d entries of %d for %v (last count error: %v)", last, want, footprintStall, countErr)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("queue at %d entries of %d: %w", last, want, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// settled waits until the goroutine count has stood still for a second
// (sampled every 250ms): the waiters have set up their waits on their
// predecessors, which follow their enqueues.
func settled(ctx context.Context, early *errList) error {
	const still = 4
	last, same, start := -1, 0, time.Now()
	for same < still {
		if early.count() > 0 {
			return fmt.Errorf("Locks failed while waiting: %v", early)
		}
		if time.Since(start) > footprintStall {
			return fmt.Errorf("goroutine count still changing after %v (%d)", footprintStall, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		g := runtime.NumGoroutine()
		if g == last {
			same++
		} else {
			last, same = g, 1
		}
	}
	return nil
}

// footprintProgress reports what a long run is doing, with -v only.
func footprintProgress(format string, args ...any) {
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	}
}

// sessionFootprint opens n sessions and returns the goroutines and heap
// bytes per session. It starts once the process has settled: what the
// waiters left (closing watches, cleanups) would otherwise be freed during
// the measurement and count against the sessions.
func sessionFootprint(ctx context.Context, session func() (closer, error), n int) (float64, float64, error) {
	if err := settled(ctx, &errList{}); err != nil {
		return 0, 0, fmt.Errorf("before opening sessions: %w", err)
	}
	g0, h0 := usage()
	var ss []closer
	defer func() {
		for _, s := range ss {
			s.Close(context.Background())
		}
	}()
	for range n {
		s, err := session()
		if err != nil {
			return 0, 0, err
		}
		ss = append(ss, s)
	}
	if err := settled(ctx, &errList{}); err != nil {
		return 0, 0, fmt.Errorf("%d sessions open: %w", n, err)
	}
	g1, h1 := usage()
	return float64(g1-g0) / float64(n), float64(int64(h1)-int64(h0)) / float64(n), nil
}
