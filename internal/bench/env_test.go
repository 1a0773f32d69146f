package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// quietTB drops the harness's own logging. Benchmarks always print what
// they log, which would bury the table among the cluster's progress
// lines. Set BENCH_ETCD_LOG=1 to see it.
type quietTB struct{ testing.TB }

func (q quietTB) Logf(format string, args ...any) {
	if os.Getenv("BENCH_ETCD_LOG") != "" {
		q.TB.Logf(format, args...)
	}
}

func (q quietTB) Log(args ...any) {
	if os.Getenv("BENCH_ETCD_LOG") != "" {
		q.TB.Log(args...)
	}
}

// env is the cluster shared by every run, and an uncounted client to look
// at it from the outside. The cluster is the harness's: 3 etcd member
// processes, each reached through the harness's loopback proxy, as a
// service's clients reach a real cluster over TCP.
type env struct {
	tb       testing.TB
	clus     *integration.EtcdCluster
	leader   int
	observer *clientv3.Client
}

func newEnv(tb testing.TB) *env {
	clus := integration.NewEtcd(quietTB{tb}, integration.WithSize(3))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader, err := clus.Leader(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	e := &env{tb: tb, clus: clus, leader: leader}
	obs, err := e.client(e.leader, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { obs.Close() })
	e.observer = obs
	return e
}

// members is the cluster's size.
func (e *env) members() int { return len(e.clus.Members) }

// term returns the highest raft term any member reports. It grows with
// every election, and an election stalls writes and cancels watches that
// require a leader: a case during which it moved is not comparable to the
// others. The harness asks each member directly (not through its proxy);
// a member that does not answer is skipped, since the others still see
// any election that needs a quorum.
func (e *env) term() uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var t uint64
	for i := range e.clus.Members {
		st, err := e.clus.Status(ctx, i)
		if err != nil {
			continue
		}
		t = max(t, st.RaftTerm)
	}
	return t
}

// progress reports what the run is doing, with -v only.
func (e *env) progress(format string, args ...any) {
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	}
}

// client connects to one member only, so that where a client sits (leader
// or follower) is chosen by the caller, the same way for both contenders.
func (e *env) client(member int, c *rpcCounter) (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:   []string{e.clus.Members[member%e.members()].ClientURL()},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	}
	if c != nil {
		cfg.DialOptions = c.dialOptions()
	}
	return clientv3.New(cfg)
}

// clientSet is n counted clients, spread round-robin over the members.
type clientSet struct {
	clis     []*clientv3.Client
	counters []*rpcCounter
}

func (e *env) clients(n int) (*clientSet, error) {
	s := &clientSet{}
	for i := range n {
		c := newRPCCounter()
		cli, err := e.client(i, c)
		if err != nil {
			s.close()
			return nil, err
		}
		s.clis = append(s.clis, cli)
		s.counters = append(s.counters, c)
	}
	return s, nil
}

func (s *clientSet) close() {
	for _, c := range s.clis {
		c.Close()
	}
}

// between returns the requests of all clients in [from, to].
func (s *clientSet) between(from, to time.Time) []rpcEvent {
	var out []rpcEvent
	for _, c := range s.counters {
		out = append(out, c.between(from, to)...)
	}
	return out
}

// quiet waits until every watch the clients asked for is confirmed and none
// of them has issued a request for d, for at most limit; if that does not
// happen, it says what was still going on.
func (s *clientSet) quiet(d, limit time.Duration) error {
	end := time.Now().Add(limit)
	for {
		var last time.Time
		pending, busy := 0, 0
		for _, c := range s.counters {
			l, p := c.activity()
			last, pending = maxTime(last, l), pending+p
			if p > 0 {
				busy++
			}
		}
		if pending == 0 && time.Since(last) >= d {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("after %v: %d watch creations unconfirmed on %d of %d clients; last request %v ago",
				limit, pending, busy, len(s.counters), time.Since(last).Round(time.Millisecond))
		}
		time.Sleep(d / 10)
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (s *clientSet) methodCounts() map[string]int {
	out := map[string]int{}
	for _, c := range s.counters {
		for k, v := range c.methodCounts() {
			out[k] += v
		}
	}
	return out
}

// countKeys returns how many keys are under prefix, by a linearizable read.
func (e *env) countKeys(prefix string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := e.observer.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Count, nil
}

// waitKeys polls until exactly want keys are under prefix (more would mean
// someone else's keys, which a run must not have).
func (e *env) waitKeys(ctx context.Context, prefix string, want int64) error {
	var last int64
	for {
		n, err := e.countKeys(prefix)
		if err == nil && n == want {
			return nil
		}
		if err == nil {
			last = n
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d keys under %s: %d there when %w", want, prefix, last, context.Cause(ctx))
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// openAll opens one handle per client index in clis (with repetition when
// handles share clients), closing those already open if one fails.
func openAll(im impl, c string, clis []*clientv3.Client, n int) ([]handle, error) {
	hs := make([]handle, n)
	err := parallel(n, 16, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h, err := im.open(ctx, clis[i%len(clis)], c)
		hs[i] = h
		return err
	})
	if err != nil {
		closeAll(hs)
		return nil, fmt.Errorf("%s: open sessions: %w", im.name, err)
	}
	return hs, nil
}

// closeAll ends the sessions of hs (skipping nils), returning the first error.
func closeAll(hs []handle) error {
	return parallel(len(hs), 16, func(i int) error {
		if hs[i] == nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return hs[i].close(ctx)
	})
}
