package scenario_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Short TTLs keep the suite quick: a paused holder loses its lock on the
// server after about this long.
const (
	etcdTTL   = 2 * time.Second
	zkTimeout = 4 * time.Second
)

// env is the lock services, real ones, shared by every scenario.
type env struct {
	etcd    *integration.EtcdCluster
	etcdCli *clientv3.Client
	zk      *integration.ZooKeeperEnsemble
	zkConn  *zk.Conn // the test's own connection, for inspecting the locks

	pg    *integration.Postgres // for sqlfence on PostgreSQL
	pgErr error                 // why pg is nil
}

// postgres returns the PostgreSQL server, or skips t if PostgreSQL is not
// installed (fails it under CI).
func (e *env) postgres(t *testing.T) *integration.Postgres {
	t.Helper()
	if errors.Is(e.pgErr, integration.ErrNoPostgres) {
		if ci := os.Getenv("CI"); ci != "" {
			t.Fatalf("CI=%s and PostgreSQL cannot run: %v", ci, e.pgErr)
		}
		t.Skipf("%v (under CI this fails)", e.pgErr)
	}
	if e.pgErr != nil {
		t.Fatal(e.pgErr)
	}
	return e.pg
}

// newEnv starts an etcd cluster and a ZooKeeper ensemble side by side.
// A missing server fails the test (under CI=true the harness insists).
func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	quiet := integration.WithLogger(slog.New(slog.DiscardHandler))
	e := &env{}
	var etcdErr, zkErr error
	var wg sync.WaitGroup
	wg.Go(func() { e.etcd, etcdErr = integration.StartEtcd(ctx, quiet) })
	wg.Go(func() { e.zk, zkErr = integration.StartZooKeeper(ctx, quiet) })
	wg.Go(func() { e.pg, e.pgErr = integration.StartPostgres(ctx, quiet) })
	wg.Wait()
	if e.pg != nil {
		t.Cleanup(func() {
			if err := e.pg.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	if e.etcd != nil {
		t.Cleanup(func() {
			if err := e.etcd.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	if e.zk != nil {
		t.Cleanup(func() {
			if err := e.zk.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	if err := errors.Join(etcdErr, zkErr); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.etcdCli, err = e.etcd.Client(); err != nil {
		t.Fatal(err)
	}
	if e.zkConn, _, err = e.zk.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	return e
}

// lockBackend is one lock service: how a child holder is specified, how
// the test process contends, and how a holder's lock is taken away from
// outside.
type lockBackend struct {
	name string
	ttl  time.Duration
	// holder specifies a child-process holder of lock.
	holder func(env *env, lock string) integration.HolderSpec
	// mutex returns a Mutex of lock in the test process, on a session of
	// its own (closed with the test).
	mutex func(ctx context.Context, t *testing.T, env *env, lock string) distlock.Locker
	// lose ends the acquisition tok from outside its holder, and says how.
	lose func(ctx context.Context, env *env, tok distlock.Token) (string, error)
}

var lockBackends = []lockBackend{
	{
		name: "etcd",
		ttl:  etcdTTL,
		holder: func(env *env, lock string) integration.HolderSpec {
			return integration.HolderSpec{Backend: "etcd", Endpoints: env.etcd.Endpoints(), Lock: lock, TTL: etcdTTL, Logger: slog.New(slog.DiscardHandler)}
		},
		mutex: func(ctx context.Context, t *testing.T, env *env, lock string) distlock.Locker {
			t.Helper()
			sess, err := etcdlock.NewSession(ctx, env.etcdCli, etcdlock.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sess.Close(context.Background()) })
			mu, err := recipe.NewMutex(sess, lock)
			if err != nil {
				t.Fatal(err)
			}
			return mu
		},
		// Revoke the holder's lease: its session has ended on the server.
		lose: func(ctx context.Context, env *env, tok distlock.Token) (string, error) {
			resp, err := env.etcdCli.Get(ctx, etcdlock.DefaultPrefix+tok.Name+"/@", clientv3.WithPrefix())
			if err != nil {
				return "", err
			}
			for _, kv := range resp.Kvs {
				if kv.CreateRevision == tok.Seq {
					if _, err := env.etcdCli.Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil {
						return "", err
					}
					return fmt.Sprintf("lease %x revoked", kv.Lease), nil
				}
			}
			return "", fmt.Errorf("no entry of %v in etcd", tok)
		},
	},
	{
		name: "zk",
		ttl:  zkTimeout,
		holder: func(env *env, lock string) integration.HolderSpec {
			return integration.HolderSpec{Backend: "zk", Endpoints: env.zk.Addrs(), Lock: lock, TTL: zkTimeout, Logger: slog.New(slog.DiscardHandler)}
		},
		mutex: func(ctx context.Context, t *testing.T, env *env, lock string) distlock.Locker {
			t.Helper()
			conn, _, err := env.zk.Connect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			sess, err := zklock.NewSession(ctx, conn)
			if err != nil {
				conn.Close()
				t.Fatal(err)
			}
			t.Cleanup(func() {
				sess.Close(context.Background())
				conn.Close()
			})
			mu, err := recipe.NewMutex(sess, lock)
			if err != nil {
				t.Fatal(err)
			}
			return mu
		},
		// Delete the holder's node (its czxid is the token).
		lose: func(ctx context.Context, env *env, tok distlock.Token) (string, error) {
			dir := zklock.DefaultPrefix + "/" + tok.Name
			children, _, err := env.zkConn.Children(dir)
			if err != nil {
				return "", err
			}
			for _, c := range children {
				_, st, err := env.zkConn.Exists(dir + "/" + c)
				if err != nil {
					return "", err
				}
				if st != nil && st.Czxid == tok.Seq {
					if err := env.zkConn.Delete(dir+"/"+c, -1); err != nil {
						return "", err
					}
					return "node " + c + " deleted", nil
				}
			}
			return "", fmt.Errorf("no node of %v in ZooKeeper", tok)
		},
	},
}

// TestScenario plays the scenarios for every lock backend × fencing
// backend, on one etcd cluster and one ZooKeeper ensemble.
func TestScenario(t *testing.T) {
	env := newEnv(t)
	for _, lb := range lockBackends {
		t.Run(lb.name, func(t *testing.T) {
			for _, fb := range fenceBackends {
				t.Run(fb.name, func(t *testing.T) {
					lock := func(s string) string { return "scenario/" + lb.name + "-" + fb.name + "/" + s }
					t.Run("paused holder", func(t *testing.T) { pausedHolder(t, env, lb, fb, lock("paused")) })
					t.Run("delayed write", func(t *testing.T) { delayedWrite(t, env, lb, fb, lock("delayed")) })
					t.Run("healthy", func(t *testing.T) { healthy(t, env, lb, fb, lock("healthy")) })
				})
			}
		})
	}
}

// pausedHolder: A holds, is stopped past its TTL; B acquires and writes;
// A wakes up, writes with its old token and is refused, and is told it
// lost the lock.
func pausedHolder(t *testing.T, env *env, lb lockBackend, fb fenceBackend, lock string) {
	ctx := ctxFor(t, 2*time.Minute)
	res := newResource(ctx, t, env, fb, lock)
	b := lb.mutex(ctx, t, env, lock)

	a := integration.NewHolder(t, lb.holder(env, lock))
	tl := newTimeline(t)
	t1 := a.Token()
	tl.mark("A acquired %v (process %d)", t1, a.PID())

	if err := a.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := tl.mark("A paused (SIGSTOP), past its %v TTL/session timeout", lb.ttl)

	lockCtx, cancel := context.WithTimeout(ctx, time.Minute)
	lb2, err := b.Lock(lockCtx)
	cancel()
	if err != nil {
		t.Fatalf("B's Lock while A is paused: %v", err)
	}
	defer lb2.Unlock(ctx)
	t2 := lb2.Token()
	tl.mark("B acquired %v", t2)
	if !t2.Newer(t1) {
		t.Fatalf("B's token %v is not newer than A's %v", t2, t1)
	}
	if err := write(ctx, res.URL(), t2, "B"); err != nil {
		t.Fatalf("B's write with %v: %v", t2, err)
	}
	tl.mark("B wrote with %v: admitted", t2)

	lost := watchLost(ctx, a, tl)
	tl.mark("A resumed (SIGCONT) after %v stopped", time.Since(paused).Round(time.Millisecond))
	if err := a.Resume(); err != nil {
		t.Fatal(err)
	}

	status, err := a.Write(ctx, res.URL(), "A")
	tl.mark("A wrote with %v: %s", t1, outcome(status, err))
	checkStale(t, status, err, t1, t2)

	select {
	case <-lost:
	case <-ctx.Done():
		t.Fatal("A was not told it lost the lock after it resumed")
	}
	if !strings.Contains(a.LostError(), distlock.ErrLost.Error()) {
		t.Errorf("A's loss: %q, want it to say %q", a.LostError(), distlock.ErrLost)
	}
	if held, lostNow, err := a.Ping(ctx); err != nil || held || !lostNow {
		t.Fatalf("A after waking up: held=%v lost=%v err=%v, want lost", held, lostNow, err)
	}
	checkLedger(ctx, t, res, []entry{{t2, "B"}})
}

// delayedWrite: A holds and writes, but the write is held in flight by a
// proxy; meanwhile A's lock is taken away, B acquires and writes; when the
// proxy lets A's request through, the resource refuses it.
func delayedWrite(t *testing.T, env *env, lb lockBackend, fb fenceBackend, lock string) {
	ctx := ctxFor(t, 2*time.Minute)
	res := newResource(ctx, t, env, fb, lock)
	proxy, err := integration.NewProxy(res.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	viaProxy := "http://" + proxy.Addr() + "/ledger"

	a := integration.NewHolder(t, lb.holder(env, lock))
	tl := newTimeline(t)
	t1 := a.Token()
	tl.mark("A acquired %v (process %d)", t1, a.PID())

	b := lb.mutex(ctx, t, env, lock)
	type result struct {
		lease *distlock.Lease
		err   error
	}
	acquired := make(chan result, 1)
	go func() {
		l, err := b.Lock(ctx)
		acquired <- result{l, err}
	}()

	proxy.Network().Set(proxy.Node(), integration.Fault{Hold: true})
	w, err := a.StartWrite(viaProxy, "A")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Sent():
	case <-w.Done():
		status, err := w.Result()
		t.Fatalf("A's write answered while the proxy holds it: %d %v", status, err)
	case <-ctx.Done():
		t.Fatal("A's write was not sent")
	}
	tl.mark("A sent its write with %v; the proxy holds it", t1)

	select {
	case r := <-acquired:
		t.Fatalf("B's Lock returned while A holds: %v", r.err)
	default:
	}
	how, err := lb.lose(ctx, env, t1)
	if err != nil {
		t.Fatalf("taking A's lock away: %v", err)
	}
	tl.mark("A's lock taken away: %s", how)
	lost := watchLost(ctx, a, tl)

	var r result
	select {
	case r = <-acquired:
	case <-ctx.Done():
		t.Fatal("B did not acquire")
	}
	if r.err != nil {
		t.Fatalf("B's Lock: %v", r.err)
	}
	defer r.lease.Unlock(ctx)
	t2 := r.lease.Token()
	tl.mark("B acquired %v", t2)
	if !t2.Newer(t1) {
		t.Fatalf("B's token %v is not newer than A's %v", t2, t1)
	}
	if err := write(ctx, res.URL(), t2, "B"); err != nil {
		t.Fatalf("B's write with %v: %v", t2, err)
	}
	tl.mark("B wrote with %v: admitted", t2)
	select {
	case <-lost:
	case <-ctx.Done():
		t.Fatal("A was not told it lost the lock")
	}
	select {
	case <-w.Done():
		status, err := w.Result()
		t.Fatalf("A's write answered while the proxy holds it: %d %v", status, err)
	default:
	}

	proxy.Network().Clear(proxy.Node())
	tl.mark("proxy releases A's request")
	status, err := w.Wait(ctx)
	tl.mark("A's write with %v answered: %s", t1, outcome(status, err))
	checkStale(t, status, err, t1, t2)
	checkLedger(ctx, t, res, []entry{{t2, "B"}})
}

// healthy: contenders take turns; every write is admitted, in token order.
func healthy(t *testing.T, env *env, lb lockBackend, fb fenceBackend, lock string) {
	ctx := ctxFor(t, 2*time.Minute)
	res := newResource(ctx, t, env, fb, lock)
	const contenders, rounds = 4, 3
	mus := make([]distlock.Locker, contenders)
	for i := range mus {
		mus[i] = lb.mutex(ctx, t, env, lock)
	}
	errs := make(chan error, contenders*rounds)
	var wg sync.WaitGroup
	for i, mu := range mus {
		wg.Go(func() {
			for r := range rounds {
				l, err := mu.Lock(ctx)
				if err != nil {
					errs <- fmt.Errorf("contender %d round %d: Lock: %w", i, r, err)
					return
				}
				if err := write(ctx, res.URL(), l.Token(), fmt.Sprintf("c%d/r%d", i, r)); err != nil {
					errs <- fmt.Errorf("contender %d round %d: write with %v: %w", i, r, l.Token(), err)
				}
				if err := l.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("contender %d round %d: Unlock: %w", i, r, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := res.entries(ctx, t)
	if len(got) != contenders*rounds {
		t.Fatalf("ledger holds %d entries, want %d", len(got), contenders*rounds)
	}
	for i := 1; i < len(got); i++ {
		if !got[i].Token.Newer(got[i-1].Token) {
			t.Fatalf("ledger entry %d (%v, %s) is not newer than entry %d (%v, %s)", i, got[i].Token, got[i].Text, i-1, got[i-1].Token, got[i-1].Text)
		}
	}
	t.Logf("%d writes admitted, tokens %v … %v", len(got), got[0].Token, got[len(got)-1].Token)
}

// outcome describes a holder's write for the timeline.
func outcome(status int, err error) string {
	var stale *fencing.StaleError
	switch {
	case errors.As(err, &stale):
		return fmt.Sprintf("%d, refused as stale (%v was admitted)", status, stale.Newest)
	case err != nil:
		return fmt.Sprintf("%d, %v", status, err)
	}
	return fmt.Sprintf("%d, admitted", status)
}

// checkStale checks that a write with t1 was refused as older than t2.
func checkStale(t *testing.T, status int, err error, t1, t2 distlock.Token) {
	t.Helper()
	if status != http.StatusConflict || !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("A's write with %v: %d %v, want 409 and ErrStale", t1, status, err)
	}
	var stale *fencing.StaleError
	if !errors.As(err, &stale) || stale.Token != t1 || stale.Newest != t2 {
		t.Fatalf("A's refusal: %#v, want token %v refused for %v", stale, t1, t2)
	}
}

// checkLedger checks the resource's ledger.
func checkLedger(ctx context.Context, t *testing.T, res *resource, want []entry) {
	t.Helper()
	if got := res.entries(ctx, t); !slices.Equal(got, want) {
		t.Fatalf("ledger: %v, want %v", got, want)
	}
}

// watchLost marks on tl when a is told it lost the lock; the channel
// returned is closed then.
func watchLost(ctx context.Context, a *integration.Holder, tl *timeline) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		select {
		case <-a.Lost():
			tl.mark("A told lost: %s", a.LostError())
			close(ch)
		case <-ctx.Done():
		}
	}()
	return ch
}

// timeline collects what happened, with times relative to its start (just
// after A acquired), and logs it when the test ends.
type timeline struct {
	start time.Time
	mu    sync.Mutex
	marks []mark
}

type mark struct {
	at   time.Duration
	text string
}

func newTimeline(t *testing.T) *timeline {
	tl := &timeline{start: time.Now()}
	t.Cleanup(func() { t.Log("timeline:\n" + tl.String()) })
	return tl
}

// mark records an event now and returns the time.
func (tl *timeline) mark(format string, args ...any) time.Time {
	now := time.Now()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.marks = append(tl.marks, mark{now.Sub(tl.start), fmt.Sprintf(format, args...)})
	return now
}

func (tl *timeline) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	ms := slices.Clone(tl.marks)
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].at < ms[j].at })
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "  %8.3fs  %s\n", m.at.Seconds(), m.text)
	}
	return b.String()
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
