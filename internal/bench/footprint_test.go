package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/zklock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkFootprint measures what a waiting Lock and an open Session cost
// the process that holds them: goroutines (including the one that called
// Lock) and heap bytes, with footprintWaiters Locks waiting on one held
// lock and footprintSessions Sessions open on one client, on the
// harness's process clusters (the heap is the client's alone, but for the
// harness's in-process proxies, whose buffers are per connection, not per
// waiter). Run it alone:
// `go test ./internal/bench -run '^$' -bench BenchmarkFootprint -benchtime 1x`.
func BenchmarkFootprint(b *testing.B) {
	const (
		footprintWaiters  = 2000
		footprintSessions = 200
	)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
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
		return etcdlock.NewMutex(s.(*etcdlock.Session), name)
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
		return zklock.NewMutex(s.(*zklock.Session), name)
	}
	zkQueued := func(name string) (int, error) {
		kids, _, err := conn.Children(zklock.DefaultPrefix + "/" + name)
		return len(kids), err
	}

	for _, st := range []struct {
		name    string
		session func() (closer, error)
		mutex   func(closer, string) (distlock.Locker, error)
		queued  func(name string) (int, error)
	}{{"etcd", etcdSession, etcdMutex, etcdQueued}, {"zookeeper", zkSession, zkMutex, zkQueued}} {
		g, h, err := waiterFootprint(ctx, st.session, st.mutex, st.queued, footprintWaiters)
		if err != nil {
			b.Fatalf("%s waiters: %v", st.name, err)
		}
		sg, sh, err := sessionFootprint(st.session, footprintSessions)
		if err != nil {
			b.Fatalf("%s sessions: %v", st.name, err)
		}
		b.Logf("%s: per waiting Lock %.2f goroutines, %.1f KB heap (%d waiters); per open Session %.2f goroutines, %.1f KB heap (%d sessions)",
			st.name, g, h/1024, footprintWaiters, sg, sh/1024, footprintSessions)
		b.ReportMetric(g, "goroutines/waiter-"+st.name)
		b.ReportMetric(h/1024, "KB/waiter-"+st.name)
		b.ReportMetric(sg, "goroutines/session-"+st.name)
		b.ReportMetric(sh/1024, "KB/session-"+st.name)
	}
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

// waiterFootprint holds one lock and has n Locks wait on it, each from a
// goroutine of its own (counted), all on one session; it returns the
// goroutines and heap bytes per waiter once every one has enqueued.
func waiterFootprint(ctx context.Context, session func() (closer, error), mutex func(closer, string) (distlock.Locker, error), queued func(string) (int, error), n int) (float64, float64, error) {
	s, err := session()
	if err != nil {
		return 0, 0, err
	}
	defer s.Close(context.Background())
	name := fmt.Sprintf("footprint-%d", time.Now().UnixNano())
	m, err := mutex(s, name)
	if err != nil {
		return 0, 0, err
	}
	held, err := m.Lock(ctx)
	if err != nil {
		return 0, 0, err
	}
	g0, h0 := usage()
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { m.Lock(wctx) })
	}
	// Wait until every waiter is in the queue, and a moment more for
	// the waits on their predecessors to be set up.
	for {
		q, err := queued(name)
		if err != nil {
			stop()
			return 0, 0, err
		}
		if q >= n+1 {
			break
		}
		select {
		case <-ctx.Done():
			stop()
			return 0, 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	time.Sleep(time.Second)
	g1, h1 := usage()
	stop()
	wg.Wait()
	held.Unlock(ctx)
	return float64(g1-g0) / float64(n), float64(int64(h1)-int64(h0)) / float64(n), nil
}

// sessionFootprint opens n sessions and returns the goroutines and heap
// bytes per session.
func sessionFootprint(session func() (closer, error), n int) (float64, float64, error) {
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
	g1, h1 := usage()
	return float64(g1-g0) / float64(n), float64(int64(h1)-int64(h0)) / float64(n), nil
}
