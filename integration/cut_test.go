package integration_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// timeWaitFiller keeps many loopback sockets in TIME_WAIT: it makes short
// connections to listeners of its own and closes each from the client
// side first, so the client's ephemeral port stays in TIME_WAIT (inode 0,
// owned by nobody) for a minute. A server's new outgoing connection then
// usually shares its local port with one or more of them — the kernel
// reuses a port towards another address — which is what made a lookup by
// local port alone attribute peer links to no server. Several listeners,
// because the kernel recycles a TIME_WAIT socket on loopback for a new
// connection to the same address after a second, and because a connect
// to an address most ports are taken for has to search the whole range:
// spread over several addresses, more of them stay, and the filling stays
// cheap for the kernel.
//
// It changes no sysctl: the ports are filled, not the range narrowed. The
// sockets last a minute, longer than the clusters take to start and make
// their peer links, which is what the test needs.
type timeWaitFiller struct {
	lns  []net.Listener
	mu   sync.Mutex
	open []net.Conn // accepted, not yet closed
	made atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
}

func newTimeWaitFiller(t *testing.T) *timeWaitFiller {
	f := &timeWaitFiller{stop: make(chan struct{})}
	t.Cleanup(f.close)
	for range 8 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		f.lns = append(f.lns, ln)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				f.mu.Lock()
				f.open = append(f.open, c)
				f.mu.Unlock()
			}
		}()
	}
	return f
}

// closeAccepted closes the server side of the connections whose clients
// have closed already: the client side, which closed first, goes to
// TIME_WAIT.
func (f *timeWaitFiller) closeAccepted() {
	f.mu.Lock()
	open := f.open
	f.open = nil
	f.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

// fill makes n connections with a few workers, in rounds: every client
// closes before the server side of its round is closed.
func (f *timeWaitFiller) fill(n int) {
	const workers, round = 8, 2000
	for done := 0; done < n; done += round {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := w; k < min(round, n-done); k += workers {
					c, err := net.Dial("tcp", f.lns[k%len(f.lns)].Addr().String())
					if err != nil {
						continue
					}
					c.Close()
					f.made.Add(1)
				}
			}()
		}
		wg.Wait()
		f.closeAccepted()
	}
}

func (f *timeWaitFiller) close() {
	select {
	case <-f.stop:
		return
	default:
	}
	close(f.stop)
	for _, ln := range f.lns {
		ln.Close()
	}
	f.wg.Wait()
	f.closeAccepted()
}

// countTimeWait counts the machine's IPv4 sockets in TIME_WAIT.
func countTimeWait() int {
	file, err := os.Open("/proc/net/tcp")
	if err != nil {
		return -1
	}
	defer file.Close()
	n := 0
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 3 && f[3] == "06" {
			n++
		}
	}
	return n
}

// cutRounds is how many times each cluster's members are cut.
const cutRounds = 6

// TestCutTakesEffectWithPortsInTimeWait fills the ephemeral port range
// with sockets in TIME_WAIT, then starts a 3-member etcd cluster and a
// 3-server ZooKeeper ensemble (so that their peer links are made on
// reused ports) and cuts a follower, then the leader, again and again.
// Every cut must take effect: Cut verifies it and fails otherwise, and the
// test looks for itself too — a cut etcd member reports no leader while
// the other two agree on one; a cut ZooKeeper server stops serving while
// the other two serve under a leader. Before connections were attributed
// exactly, most of these cuts cut nothing.
func TestCutTakesEffectWithPortsInTimeWait(t *testing.T) {
	f := newTimeWaitFiller(t)
	start := time.Now()
	f.fill(25000)
	t.Logf("%d connections closed client side first in %v; %d IPv4 sockets in TIME_WAIT",
		f.made.Load(), time.Since(start).Round(time.Millisecond), countTimeWait())

	// Both clusters start after the filling, so every peer link they
	// make is made on a port shared with a TIME_WAIT socket.
	var etcd *integration.EtcdCluster
	var zk *integration.ZooKeeperEnsemble
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); etcd = startEtcd(t) }()
	go func() { defer wg.Done(); zk = startZooKeeper(t) }()
	wg.Wait()
	if etcd == nil || zk == nil {
		t.FailNow()
	}

	t.Run("etcd", func(t *testing.T) {
		ctx := ctxFor(t, 2*time.Minute)
		for round := range cutRounds {
			lead, err := etcd.Leader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			i := lead
			if round%2 == 0 {
				i = (lead + 1) % len(etcd.Members)
			}
			began := time.Now()
			if err := etcd.Cut(i); err != nil {
				etcd.Heal(i)
				t.Fatalf("round %d: %v", round, err)
			}
			cutTook := time.Since(began)
			// Independently of Cut's own check: the member has no leader,
			// and the other two come to agree on one that is not it.
			// A status call on a loaded 2-core runner can miss its own
			// one-second timeout; only its answer is the test's business.
			var st *clientv3.StatusResponse
			if err := poll(ctx, func() (err error) {
				st, err = etcd.Status(ctx, i)
				return err
			}); err != nil {
				t.Fatalf("round %d: status of cut member %d: %v", round, i, err)
			}
			if st.Leader != 0 {
				t.Fatalf("round %d: cut member %d still reports leader %x", round, i, st.Leader)
			}
			// (The others may follow a cut leader for an election timeout
			// more: they notice its silence by themselves.)
			if err := poll(ctx, func() error {
				l, err := etcd.Leader(ctx)
				if err == nil && l == i {
					err = fmt.Errorf("a majority still follows the cut member %d", i)
				}
				return err
			}); err != nil {
				t.Fatalf("round %d: no leader besides the cut member %d: %v", round, i, err)
			}
			began = time.Now()
			etcd.Heal(i)
			if err := etcd.WaitHealthy(ctx); err != nil {
				t.Fatal(err)
			}
			t.Logf("round %d: cut %d (leader %d) took effect in %v; healthy %v after the heal",
				round, i, lead, cutTook.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
		}
	})

	t.Run("zookeeper", func(t *testing.T) {
		ctx := ctxFor(t, 2*time.Minute)
		for round := range cutRounds {
			lead, err := zk.Leader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			i := lead
			if round%2 == 0 {
				i = (lead + 1) % len(zk.Servers)
			}
			began := time.Now()
			if err := zk.Cut(i); err != nil {
				zk.Heal(i)
				t.Fatalf("round %d: %v", round, err)
			}
			cutTook := time.Since(began)
			// Independently: asked directly, the cut server serves no one,
			// and the other two serve under a leader that is not it.
			var mode string
			if err := poll(ctx, func() (err error) {
				mode, err = zk.Servers[i].Mode(ctx)
				return err
			}); err != nil || mode != "" {
				t.Fatalf("round %d: cut server %d answers mode %q, %v; want it not serving", round, i, mode, err)
			}
			// (The others may follow a cut leader for an election timeout
			// more: they notice its silence by themselves.)
			if err := poll(ctx, func() error {
				l, err := zk.Leader(ctx)
				if err == nil && l == i {
					err = fmt.Errorf("a majority still follows the cut server %d", i)
				}
				return err
			}); err != nil {
				t.Fatalf("round %d: no leader besides the cut server %d: %v", round, i, err)
			}
			began = time.Now()
			zk.Heal(i)
			if err := zk.WaitHealthy(ctx); err != nil {
				t.Fatal(err)
			}
			t.Logf("round %d: cut %d (leader %d) took effect in %v; healthy %v after the heal",
				round, i, lead, cutTook.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
		}
	})
}

// startEtcd and startZooKeeper start a cluster from a goroutine other
// than the test's, reporting failure with Error (FailNow must not be
// called there).
func startEtcd(t *testing.T) *integration.EtcdCluster {
	c, err := integration.StartEtcd(ctxFor(t, 3*time.Minute), integration.WithLogger(logTo(t)))
	if err != nil {
		t.Error(err)
		return nil
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil && !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	})
	return c
}

func startZooKeeper(t *testing.T) *integration.ZooKeeperEnsemble {
	e, err := integration.StartZooKeeper(ctxFor(t, 3*time.Minute), integration.WithLogger(logTo(t)))
	if err != nil {
		t.Error(err)
		return nil
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// logTo logs the harness's warnings to t.
func logTo(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
