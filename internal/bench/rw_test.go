package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
)

// rwContenders and rwWriteShare are BenchmarkRW's workload: this many
// contenders, each with a client and session of its own, doing every
// acquisition as a write with this probability and as a read otherwise.
const (
	rwContenders = 8
	rwWriteShare = 0.1
)

// rwPerContender is how many acquisitions each contender makes in each
// run; $BENCH_RW_N overrides it.
func rwPerContender() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_RW_N")); err == nil && n > 0 {
		return n
	}
	return pick(150, 50)
}

// rwLocker is one contender's pair of acquire functions; for the
// exclusive Mutex both are its Lock.
type rwLocker struct {
	rlock, lock func(ctx context.Context) (*distlock.Lease, error)
	close       func()
}

// rwResult is one run: acquisitions over wall time.
type rwResult struct {
	backend, lock string
	acquisitions  int
	writes        int
	elapsed       time.Duration
}

func (r rwResult) perSecond() float64 { return float64(r.acquisitions) / r.elapsed.Seconds() }

// runRW runs the workload on ls, one goroutine per contender, and checks
// in process that no writer ever held together with anyone else (the
// critical section is otherwise empty). Contender i's sequence of reads and
// writes is the same in every run, so the RWMutex and the Mutex do the
// same number of acquisitions, of which the Mutex treats every one as a
// write.
func runRW(backend, lock string, ls []rwLocker, per int) (rwResult, error) {
	var (
		readers, writers atomic.Int64
		writes           atomic.Int64
		wg               sync.WaitGroup
		mu               sync.Mutex
		first            error
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
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for range per {
				write := rng.Float64() < rwWriteShare
				acquire := l.rlock
				if write {
					acquire = l.lock
					writes.Add(1)
				}
				lease, err := acquire(ctx)
				if err != nil {
					fail(fmt.Errorf("contender %d: %w", i, err))
					cancel()
					return
				}
				if write {
					if writers.Add(1) != 1 || readers.Load() != 0 {
						fail(fmt.Errorf("contender %d: a writer held together with others", i))
					}
					writers.Add(-1)
				} else {
					readers.Add(1)
					if writers.Load() != 0 {
						fail(fmt.Errorf("contender %d: a reader held together with a writer", i))
					}
					readers.Add(-1)
				}
				if err := lease.Unlock(ctx); err != nil {
					fail(fmt.Errorf("contender %d: unlock: %w", i, err))
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	r := rwResult{backend: backend, lock: lock, acquisitions: len(ls) * per, writes: int(writes.Load()), elapsed: time.Since(start)}
	return r, first
}

// BenchmarkRW compares the throughput of RWMutex under a read-mostly load
// (8 contenders, 90% RLock, 10% Lock, empty critical section) with that of
// the exclusive Mutex doing the same acquisitions, on a 3-member etcd
// cluster and a 3-server ZooKeeper ensemble, in one run:
//
//	go -C internal/bench test . -run '^$' -bench BenchmarkRW -benchtime 1x -timeout 20m
//
// Like BenchmarkCompare it runs once whatever b.N. It logs a table and
// reports acquisitions per second and the RWMutex/Mutex ratio per
// backend. Set BENCH_RW_SKIP_ZK=1 to run etcd only.
func BenchmarkRW(b *testing.B) {
	etcdVerify(b)
	per := rwPerContender()
	var results []rwResult
	run := func(backend string, open func(lock string) []rwLocker) {
		// The Mutex runs first on one backend and second on the other,
		// so that neither always inherits the other's leftovers.
		locks := []string{"RWMutex", "Mutex"}
		if len(results) > 0 {
			locks = []string{"Mutex", "RWMutex"}
		}
		for _, lock := range locks {
			ls := open(lock)
			r, err := runRW(backend, lock, ls, per)
			for _, l := range ls {
				l.close()
			}
			if err != nil {
				b.Fatalf("%s %s: %v", backend, lock, err)
			}
			results = append(results, r)
		}
	}
	run("etcd", func(lock string) []rwLocker { return openEtcdRW(b, lock) })
	if os.Getenv("BENCH_RW_SKIP_ZK") == "" {
		run("zookeeper", func(lock string) []rwLocker { return openZKRW(b, lock) })
	}

	var tbl strings.Builder
	fmt.Fprintf(&tbl, "\n%d contenders, %.0f%% writes, %d acquisitions each\n\n", rwContenders, 100*rwWriteShare, per)
	fmt.Fprintf(&tbl, "| backend | lock | acquisitions | writes | time | acq/s | RWMutex ÷ Mutex |\n|---|---|---:|---:|---:|---:|---:|\n")
	rate := map[string]float64{}
	for _, r := range results {
		rate[r.backend+"/"+r.lock] = r.perSecond()
	}
	for _, r := range results {
		ratio := ""
		if r.lock == "RWMutex" {
			ratio = fmt.Sprintf("%.2f×", r.perSecond()/rate[r.backend+"/Mutex"])
		}
		writes := strconv.Itoa(r.writes)
		if r.lock == "Mutex" {
			writes = strconv.Itoa(r.acquisitions) + " (all)"
		}
		fmt.Fprintf(&tbl, "| %s | %s | %d | %s | %v | %.0f | %s |\n", r.backend, r.lock, r.acquisitions, writes,
			r.elapsed.Round(time.Millisecond), r.perSecond(), ratio)
	}
	// The testing package cuts a benchmark's log after ten lines (the
	// ensemble's own take some): the table goes to stdout too.
	fmt.Println(tbl.String())
	b.Log(tbl.String())
	for _, backend := range []string{"etcd", "zookeeper"} {
		rw, ok := rate[backend+"/RWMutex"]
		if !ok {
			continue
		}
		m := rate[backend+"/Mutex"]
		// Both are ours: the RWMutex's anchor is our own Mutex doing the
		// same acquisitions, so its ratio is a record of its own.
		o := &recs{bench: "rw", store: backend}
		o.add("ours", "acq_per_s_rwmutex", 0, rw, "1/s")
		o.add("ours", "acq_per_s_mutex", 0, m, "1/s")
		o.add("ours", "rwmutex_per_mutex", 0, rw/m, "count")
		emit(b, o.out...)
		b.ReportMetric(rw, "acq/s-rw-"+backend)
		b.ReportMetric(m, "acq/s-mutex-"+backend)
		b.ReportMetric(rw/m, "ratio-"+backend)
	}
}

// openEtcdRW starts (once per benchmark) a 3-member etcd cluster and opens
// rwContenders contenders on it, each on a client of its own spread over
// the members, for the RWMutex or the Mutex of one lock name.
func openEtcdRW(b *testing.B, lock string) []rwLocker {
	e := etcdRWEnv(b)
	ls := make([]rwLocker, rwContenders)
	err := parallel(rwContenders, rwContenders, func(i int) error {
		cli, err := e.client(i, nil)
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
			m, err := recipe.NewMutex(s, "bench-rw-mutex")
			ls[i].rlock, ls[i].lock = m.Lock, m.Lock
			return err
		}
		m, err := recipe.NewRWMutex(s, "bench-rw")
		ls[i].rlock, ls[i].lock = m.RLock, m.Lock
		return err
	})
	if err != nil {
		b.Fatalf("etcd %s: open: %v", lock, err)
	}
	return ls
}

var (
	rwEtcd *env
	rwZK   *zkEnv
)

func etcdRWEnv(b *testing.B) *env {
	if rwEtcd == nil {
		rwEtcd = newEnv(b)
		b.Cleanup(func() { rwEtcd = nil })
	}
	return rwEtcd
}

// openZKRW is openEtcdRW on a 3-server ZooKeeper ensemble, each contender
// on a connection (and ZooKeeper session) of its own.
func openZKRW(b *testing.B, lock string) []rwLocker {
	z := zkRWEnv(b)
	ls := make([]rwLocker, rwContenders)
	err := parallel(rwContenders, rwContenders, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		conn, _, err := z.connect(ctx, i)
		if err != nil {
			return err
		}
		s, err := zklock.NewSession(ctx, conn, recipe.WithPrefix("/bench-rw"))
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
			ls[i].rlock, ls[i].lock = m.Lock, m.Lock
			return err
		}
		m, err := recipe.NewRWMutex(s, "rw")
		ls[i].rlock, ls[i].lock = m.RLock, m.Lock
		return err
	})
	if err != nil {
		b.Fatalf("zookeeper %s: open: %v", lock, err)
	}
	return ls
}
