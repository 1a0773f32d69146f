package interop_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/interop"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
)

// TestMixedClientsFenced is the mixed-client fault run: holders of three
// clients queue on one etcd lock — distlock (a lockholder process),
// etcdctl lock (a process) and the v3lock service (a lease of the
// test's) — and each writes through one distlock fence with the token
// distlock gives its acquisition. Each holder in turn is frozen past its
// TTL (SIGSTOP) or has its session expire (its lease's keepalives stop),
// its successor takes the lock and writes, and the old holder's late
// write must be refused. The grants follow the queue's order (FIFO by
// create revision), the fence admits tokens only in that order, and the
// frozen distlock holder reports its loss on waking.
func TestMixedClientsFenced(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ctl, err := interop.FindEtcdctl(ctx)
	need(t, err)
	c := integration.NewEtcd(t, integration.WithSize(1))
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })

	const name = "mixed"
	fw := newFencedResource(ctx, t, name)
	write := fw.write
	token := func(key string) distlock.Token {
		t.Helper()
		tok, err := etcdlock.EntryToken(ctx, cli, etcdPrefix, key)
		if err != nil {
			t.Fatalf("the token of %s: %v", key, err)
		}
		return tok
	}
	const ttl = 2 // seconds: etcdlock.MinTTL, and the others' alike

	// A: distlock, first in the queue.
	a, err := integration.StartHolder(ctx, integration.HolderSpec{Backend: "etcd", Endpoints: c.Endpoints(), Lock: name, Prefix: etcdPrefix, TTL: ttl * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })

	// B: etcdctl lock, behind A; it prints its key once it holds.
	b := exec.Command(ctl.Path, "--endpoints="+strings.Join(c.Endpoints(), ","), "lock", fmt.Sprintf("--ttl=%d", ttl), etcdPrefix+name)
	bout, err := b.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Process.Kill(); b.Wait() })
	bKey := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(bout)
		if sc.Scan() {
			bKey <- strings.TrimSpace(sc.Text())
		}
		for sc.Scan() {
		}
	}()
	waitForeign(ctx, t, cli, name, 1)

	// C: the v3lock service on a lease of the test's, behind B.
	lease, err := cli.Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	kctx, stopKeepAlive := context.WithCancel(ctx)
	defer stopKeepAlive()
	ka, err := cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range ka {
		}
	}()
	cKey := make(chan string, 1)
	go func() {
		resp, err := v3lockpb.NewLockClient(cli.ActiveConnection()).Lock(ctx, &v3lockpb.LockRequest{Name: []byte(etcdPrefix + name), Lease: int64(lease.ID)})
		if err != nil {
			t.Errorf("v3lock Lock: %v", err)
			close(cKey)
			return
		}
		cKey <- string(resp.Key)
	}()
	waitForeign(ctx, t, cli, name, 2)

	// A holds and writes; frozen past its TTL, its lease expires and B
	// takes the lock.
	if _, err := a.Write(ctx, fw.url, "a"); err != nil {
		t.Fatalf("A's write while it holds: %v", err)
	}
	aTok := a.Token()
	if err := a.Pause(); err != nil {
		t.Fatal(err)
	}
	var bk string
	select {
	case bk = <-bKey:
	case <-ctx.Done():
		t.Fatal("etcdctl lock never took the lock after A froze")
	}
	bTok := token(bk)
	if err := write(bTok); err != nil {
		t.Fatalf("B's write: %v", err)
	}
	// A wakes up: its late write is refused, and it hears of its loss.
	if err := a.Resume(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write(ctx, fw.url, "a, late"); !errors.Is(err, fencing.ErrStale) {
		t.Errorf("A's write after B's: %v, want it refused as stale", err)
	}
	select {
	case <-a.Lost():
	case <-ctx.Done():
		t.Error("the frozen distlock holder did not report its loss after waking")
	}

	// B is frozen past its TTL: C (v3lock) takes the lock and writes; B's
	// late write is refused.
	if err := b.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var ck string
	select {
	case ck = <-cKey:
	case <-ctx.Done():
		t.Fatal("the v3lock Lock never returned after B froze")
	}
	cTok := token(ck)
	if err := write(cTok); err != nil {
		t.Fatalf("C's write: %v", err)
	}
	b.Process.Signal(syscall.SIGCONT)
	if err := write(bTok); !errors.Is(err, fencing.ErrStale) {
		t.Errorf("B's write after C's: %v, want it refused as stale", err)
	}

	// D, distlock again, queues behind C; C's session expires (its
	// keepalives stop), D takes the lock and writes; C's late write is
	// refused.
	d, err := integration.StartHolder(ctx, integration.HolderSpec{Backend: "etcd", Endpoints: c.Endpoints(), Lock: name, Prefix: etcdPrefix, TTL: ttl * time.Second, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	stopKeepAlive()
	res, err := d.Result(ctx)
	if err != nil || !res.Acquired {
		t.Fatalf("D's Lock after C's lease expired: %+v, %v", res, err)
	}
	if _, err := d.Write(ctx, fw.url, "d"); err != nil {
		t.Fatalf("D's write: %v", err)
	}
	if err := write(cTok); !errors.Is(err, fencing.ErrStale) {
		t.Errorf("C's write after D's: %v, want it refused as stale", err)
	}

	// FIFO by create revision, and the fence admitted exactly that order.
	dTok := res.Token
	fw.check(t, []distlock.Token{aTok, bTok, cTok, dTok})
	t.Logf("admitted in order: distlock %v, etcdctl %v, v3lock %v, distlock %v", aTok, bTok, cTok, dTok)
}

// waitForeign waits until lock name's queue (under etcdPrefix) lists n
// entries of etcd's own clients behind distlock's.
func waitForeign(ctx context.Context, t *testing.T, cli *clientv3.Client, name string, n int) {
	t.Helper()
	for {
		resp, err := cli.Get(ctx, etcdPrefix+name+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, kv := range resp.Kvs {
			if !strings.Contains(string(kv.Key), "/@") {
				got++
			}
		}
		if got >= n {
			return
		}
		wctx, cancel := context.WithCancel(ctx)
		w := cli.Watch(wctx, etcdPrefix+name+"/", clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		select {
		case <-w:
			cancel()
		case <-ctx.Done():
			cancel()
			t.Fatalf("waiting for %d foreign entries of %s: %v", n, name, ctx.Err())
		}
	}
}

// fencedResource is the resource the mixed runs' holders write to: an
// HTTP endpoint behind one memory fence of the lock, which records the
// tokens it admitted.
type fencedResource struct {
	ctx      context.Context
	url      string
	mu       sync.Mutex
	admitted []distlock.Token
}

func newFencedResource(ctx context.Context, t *testing.T, lock string) *fencedResource {
	t.Helper()
	fence, err := fencing.NewMemory(lock)
	if err != nil {
		t.Fatal(err)
	}
	fr := &fencedResource{ctx: ctx}
	srv := httptest.NewServer(fencing.Middleware(fence, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := fencing.FromContext(r.Context())
		fr.mu.Lock()
		fr.admitted = append(fr.admitted, tok)
		fr.mu.Unlock()
	})))
	t.Cleanup(srv.Close)
	fr.url = srv.URL
	return fr
}

// write is a write through the fence with tok, as a holder of another
// client makes it; it returns the fence's refusal, if any.
func (fr *fencedResource) write(tok distlock.Token) error {
	req, _ := http.NewRequestWithContext(fr.ctx, http.MethodPost, fr.url, strings.NewReader("entry"))
	fencing.SetToken(req.Header, tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return fencing.ResponseError("the test's fence", resp)
}

// check fails t unless the fence admitted exactly want, in order.
func (fr *fencedResource) check(t *testing.T, want []distlock.Token) {
	t.Helper()
	for i := 1; i < len(want); i++ {
		if want[i].Seq <= want[i-1].Seq {
			t.Errorf("grant %d's token %v is not after %v: not the queue's order", i+1, want[i], want[i-1])
		}
	}
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if fmt.Sprint(fr.admitted) != fmt.Sprint(want) {
		t.Errorf("the fence admitted %v, want %v (each holder once, in queue order, no late write)", fr.admitted, want)
	}
}

// TestMixedClientsFencedZooKeeper is the mixed-client fault run on
// ZooKeeper: distlock (a lockholder process, in CompatGoZookeeper, whose
// names Curator and zk.Lock both count), Curator's InterProcessMutex (a
// Java process) and go-zookeeper's zk.Lock (its own connection) queue on
// one lock, which they all see as one queue. Each holder in turn is
// frozen past its session timeout or has its session expired, its
// successor takes the lock and writes, and its late write is refused.
func TestMixedClientsFencedZooKeeper(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cur, err := interop.FindCurator(ctx)
	need(t, err)
	ens := integration.NewZooKeeper(t, integration.WithSize(1))
	admin, events, err := ens.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range events {
		}
	}()
	t.Cleanup(admin.Close)
	const name = "mixed"
	dir := zkPrefix + "/" + name
	fw := newFencedResource(ctx, t, name)
	inspect, err := zklock.NewAdmin(admin, zkPrefix)
	if err != nil {
		t.Fatal(err)
	}
	// holding returns the token of the entry of client that holds, as
	// Inspect shows it: the one distlock gives that acquisition.
	holding := func(client string) distlock.Token {
		t.Helper()
		q, err := inspect.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range q {
			if e.Holding && e.Client == client {
				return e.Token
			}
		}
		t.Fatalf("no %s entry holds lock %s: %+v", client, name, q)
		return distlock.Token{}
	}
	waitQueue := func(n int) {
		t.Helper()
		enough := errors.New("enough")
		if err := inspect.WatchQueue(ctx, name, func(q []distlock.QueueEntry) error {
			if len(q) >= n {
				return enough
			}
			return nil
		}); !errors.Is(err, enough) {
			t.Fatalf("waiting for %d entries of %s: %v", n, name, err)
		}
	}
	spec := integration.HolderSpec{Backend: "zk", Endpoints: ens.Addrs(), Lock: name, Prefix: zkPrefix, Compat: distlock.CompatGoZookeeper}

	// A: distlock, first in the queue.
	a, err := integration.StartHolder(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	// B: Curator, behind A.
	b := cur.Holder(strings.Join(ens.Addrs(), ","), dir, "mutex")
	t.Cleanup(func() { b.Close() })
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitQueue(2)
	// C: zk.Lock, behind B.
	cconn, cevents, err := ens.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range cevents {
		}
	}()
	t.Cleanup(cconn.Close)
	cLocked := make(chan error, 1)
	go func() { cLocked <- zk.NewLock(cconn, dir, zk.WorldACL(zk.PermAll)).Lock() }()
	waitQueue(3)

	// A writes; frozen past its session timeout, its session expires and
	// Curator takes the lock.
	if _, err := a.Write(ctx, fw.url, "a"); err != nil {
		t.Fatalf("A's write while it holds: %v", err)
	}
	aTok := a.Token()
	if err := a.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := interop.WaitGranted(ctx, b); err != nil {
		t.Fatalf("Curator after A froze: %v", err)
	}
	bTok := holding(distlock.ClientCurator)
	if err := fw.write(bTok); err != nil {
		t.Fatalf("Curator's write: %v", err)
	}
	if err := a.Resume(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write(ctx, fw.url, "a, late"); !errors.Is(err, fencing.ErrStale) {
		t.Errorf("A's write after Curator's: %v, want it refused as stale", err)
	}
	select {
	case <-a.Lost():
	case <-ctx.Done():
		t.Error("the frozen distlock holder did not report its loss after waking")
	}

	// Curator frozen past its session timeout: zk.Lock takes the lock.
	pb, ok := b.(interop.Pausable)
	if !ok {
		t.Fatal("the Curator holder cannot be paused")
	}
	if err := pb.Pause(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cLocked:
		if err != nil {
			t.Fatalf("zk.Lock after Curator froze: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("zk.Lock never took the lock after Curator froze")
	}
	cTok, err := zklock.HolderToken(ctx, cconn, zkPrefix, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.write(cTok); err != nil {
		t.Fatalf("zk.Lock's write: %v", err)
	}
	pb.Resume()
	if err := fw.write(bTok); !errors.Is(err, fencing.ErrStale) {
		t.Errorf("Curator's write after zk.Lock's: %v, want it refused as stale", err)
	}

	// D, distlock again, behind zk.Lock, whose session is expired.
	spec.Wait = true
	d, err := integration.StartHolder(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if err := ens.ExpireSession(ctx, cconn); err != nil {
		t.Fatal(err)
	}
	res, err := d.Result(ctx)
	if err != nil || !res.Acquired {
		t.Fatalf("D's Lock after zk.Lock's session expired: %+v, %v", res, err)
	}
	if _, err := d.Write(ctx, fw.url, "d"); err != nil {
		t.Fatalf("D's write: %v", err)
	}
	if err := fw.write(cTok); !errors.Is(err, fencing.ErrStale) {
		t.Errorf("zk.Lock's write after D's: %v, want it refused as stale", err)
	}
	fw.check(t, []distlock.Token{aTok, bTok, cTok, res.Token})
	t.Logf("admitted in order: distlock %v, curator %v, zk.Lock %v, distlock %v", aTok, bTok, cTok, res.Token)
}
