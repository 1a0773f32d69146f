package etcdlock_test

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	dlintegration "github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/locktest"
	"github.com/distlock/distlock/recipe"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/tests/v3/framework/integration"
	"go.uber.org/zap"
)

// TestContract runs the backend-neutral lock contract on a real 3-member
// etcd cluster per case; each session gets a client of its own, on the
// members in turn.
func TestContract(t *testing.T) {
	locktest.Run(t, func(t *testing.T) locktest.Backend {
		return &etcdBackend{clus: newCluster(t)}
	})
}

// TestLockDelay runs the contract's lock-delay cases on a real 3-member
// etcd cluster per case: a holder's lease revoked by another client holds
// its successor back for the delay; a clean Unlock does not.
func TestLockDelay(t *testing.T) {
	locktest.RunLockDelay(t, func(t *testing.T) locktest.DelayBackend {
		return &etcdBackend{clus: newCluster(t)}
	})
}

// DelayedSession makes etcdBackend a locktest.DelayBackend.
func (b *etcdBackend) DelayedSession(t *testing.T, d time.Duration) locktest.Session {
	cli := newClient(t, b.clus, b.n%3)
	b.n++
	return &etcdSession{s: newSession(t, cli, recipe.WithLockDelay(d)), admin: b.clus.Client(0)}
}

type etcdBackend struct {
	clus *integration.Cluster
	n    int
}

func (b *etcdBackend) Session(t *testing.T) locktest.Session {
	cli := newClient(t, b.clus, b.n%3)
	b.n++
	return &etcdSession{s: newSession(t, cli), admin: b.clus.Client(0)}
}

func (b *etcdBackend) ObservedSession(t *testing.T, o locktest.Observed) locktest.Session {
	cli := newClient(t, b.clus, b.n%3)
	b.n++
	opts := []recipe.Option{recipe.WithMeterProvider(o.MeterProvider), recipe.WithTracerProvider(o.TracerProvider), recipe.WithNameNormalizer(o.NameNormalizer)}
	if o.Short {
		opts = append(opts, etcdlock.WithTTL(3*time.Second))
	}
	if o.Revocable {
		opts = append(opts, recipe.WithRevocable())
	}
	return &etcdSession{s: newSession(t, cli, opts...), admin: b.clus.Client(0)}
}

func (b *etcdBackend) Revoke(ctx context.Context, name string, r distlock.RevokeRequest) ([]distlock.Revocation, error) {
	a, err := etcdlock.NewAdmin(b.clus.Client(0), etcdlock.DefaultPrefix)
	if err != nil {
		return nil, err
	}
	return a.Revoke(ctx, name, r)
}

func (b *etcdBackend) Revocations(ctx context.Context, name string) ([]distlock.Revocation, error) {
	a, err := etcdlock.NewAdmin(b.clus.Client(0), etcdlock.DefaultPrefix)
	if err != nil {
		return nil, err
	}
	return a.Revocations(ctx, name)
}

func (b *etcdBackend) Entries(t *testing.T, name string) []string {
	return queueKeys(t, b.clus.Client(0), name)
}

// WaitEntries watches the lock's queue from the revision it read, so no
// enqueue between the read and the watch is missed.
func (b *etcdBackend) WaitEntries(t *testing.T, name string, n int) {
	t.Helper()
	cli := b.clus.Client(0)
	dir := etcdlock.DefaultPrefix + name + "/@"
	ctx := testCtx(t)
	resp, err := cli.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var have int64
	for _, kv := range resp.Kvs {
		if !isTermRecord(kv.Key) {
			have++
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := cli.Watch(wctx, dir, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	for have < int64(n) {
		r, ok := <-wch
		if !ok {
			t.Fatalf("lock %q: %d entries, want %d: %v", name, have, n, ctx.Err())
		}
		for _, ev := range r.Events {
			switch {
			case isTermRecord(ev.Kv.Key):
			case ev.Type == clientv3.EventTypePut && ev.Kv.Version == 1:
				have++
			case ev.Type == clientv3.EventTypeDelete:
				have--
			}
		}
	}
}

type etcdSession struct {
	s     *etcdlock.Session
	admin *clientv3.Client
}

func (s *etcdSession) Mutex(name string) (distlock.Locker, error) {
	return recipe.NewMutex(s.s, name)
}

func (s *etcdSession) MultiMutex(names ...string) (distlock.Locker, error) {
	return recipe.NewMultiMutex(s.s, names...)
}

// End revokes the lease from another client, as its expiry would.
func (s *etcdSession) End(t *testing.T) {
	if _, err := s.admin.Revoke(testCtx(t), s.s.ID()); err != nil {
		t.Fatal(err)
	}
}

// Cut closes the session's own client (made for it alone by Session).
func (s *etcdSession) Cut(t *testing.T) { s.s.Client().Close() }

func (s *etcdSession) Close(t *testing.T) {
	if err := s.s.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

// TestDeadlineSweep runs the contract's deadline sweep (a Lock cut off
// at every point of its enqueue leaves nothing behind) on a real 3-member etcd cluster: Locks of every kind cut off at every
// point of their enqueue leave nothing behind.
func TestDeadlineSweep(t *testing.T) {
	locktest.DeadlineSweep(t, &etcdBackend{clus: newCluster(t)}, locktest.SweepConfig{})
}

func (s *etcdSession) Semaphore(name string, n int) (locktest.Semaphore, error) {
	return recipe.NewSemaphore(s.s, name, n)
}

// SemaphoreEntries reads the line ("c" keys) and the slots ("p" keys).
func (b *etcdBackend) SemaphoreEntries(t *testing.T, name string) (line, slots []string) {
	for _, k := range queueKeys(t, b.clus.Client(0), name) {
		switch k[len(etcdlock.DefaultPrefix+name+"/@")] {
		case 'c':
			line = append(line, k)
		case 'p':
			slots = append(slots, k)
		}
	}
	return line, slots
}

// WaitLine watches the line's keys from the revision it read.
func (b *etcdBackend) WaitLine(t *testing.T, name string, n int) {
	t.Helper()
	cli := b.clus.Client(0)
	line := etcdlock.DefaultPrefix + name + "/@c"
	ctx := testCtx(t)
	resp, err := cli.Get(ctx, line, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	have := resp.Count
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := cli.Watch(wctx, line, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	for have < int64(n) {
		r, ok := <-wch
		if !ok {
			t.Fatalf("semaphore %q: %d in line, want %d: %v", name, have, n, ctx.Err())
		}
		for _, ev := range r.Events {
			switch {
			case isTermRecord(ev.Kv.Key):
			case ev.Type == clientv3.EventTypePut && ev.Kv.Version == 1:
				have++
			case ev.Type == clientv3.EventTypeDelete:
				have--
			}
		}
	}
}

func (s *etcdSession) TTL() time.Duration { return s.s.TTL() }

// DeletionOrder watches the lock's keys from the revision of a read that
// found them all: one watch, whose events come in revision order.
func (b *etcdBackend) DeletionOrder(t *testing.T, name string, keys []string) func() ([]string, []time.Time) {
	t.Helper()
	cli := b.clus.Client(0)
	ctx := testCtx(t)
	dir := etcdlock.DefaultPrefix + name + "/"
	resp, err := cli.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = false
	}
	for _, kv := range resp.Kvs {
		if _, ok := want[string(kv.Key)]; ok {
			want[string(kv.Key)] = true
		}
	}
	for k, present := range want {
		if !present {
			t.Fatalf("DeletionOrder: key %s is not there", k)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	wch := cli.Watch(wctx, dir, clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithRev(resp.Header.Revision+1))
	type deletion struct {
		key string
		at  time.Time
	}
	// Read as the events come, so that each is stamped when it arrived.
	seen := make(chan deletion, len(keys))
	go func() {
		defer close(seen)
		n := 0
		for r := range wch {
			for _, ev := range r.Events {
				if _, ok := want[string(ev.Kv.Key)]; ok && n < len(keys) {
					seen <- deletion{string(ev.Kv.Key), time.Now()}
					n++
				}
			}
		}
	}()
	return func() ([]string, []time.Time) {
		t.Helper()
		defer cancel()
		var order []string
		var at []time.Time
		for len(order) < len(keys) {
			d, ok := <-seen
			if !ok {
				t.Fatalf("DeletionOrder: watch ended after %q: %v", order, ctx.Err())
			}
			order, at = append(order, d.key), append(at, d.at)
		}
		return order, at
	}
}

// RelayedSession makes etcdBackend a locktest.RelayBackend, for the
// contract's step-down cases: a session on a client of its own that
// reaches its member through an integration.ClientRelay (of this module), whose faults hit
// this client alone. The relay dials TCP and the framework's members
// listen on unix sockets, so a forwarder of this test stands between the
// two; a connection the relay closes is closed at the member too.
func (b *etcdBackend) RelayedSession(t *testing.T) (locktest.Session, locktest.ClientFaults) {
	t.Helper()
	m := b.clus.Members[b.n%3]
	b.n++
	relay, err := dlintegration.NewClientRelay([]string{unixForwarder(t, m.GRPCURL)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	cli, err := clientv3.New(clientv3.Config{Endpoints: relay.Addrs(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return &etcdSession{s: newSession(t, cli), admin: b.clus.Client(0)}, relayFaults{relay}
}

// relayFaults are a ClientRelay's faults as locktest.ClientFaults.
type relayFaults struct{ r *dlintegration.ClientRelay }

func (f relayFaults) HoldReplies() (func(), error) { return f.r.HoldReplies() }
func (f relayFaults) Cut() (func(), error)         { return f.r.Cut() }
func (f relayFaults) Reset() error                 { f.r.Reset(); return nil }

// unixForwarder listens on a loopback TCP port and forwards every
// connection to the unix socket of url ("unix://path"); it returns the
// port's address. It closes, with every connection through it, when the
// test ends; a connection closed on either side is closed on the other.
func unixForwarder(t *testing.T, url string) string {
	t.Helper()
	path, ok := strings.CutPrefix(url, "unix://")
	if !ok {
		t.Fatalf("member URL %s: not a unix socket", url)
	}
	path, err := filepath.Abs(path) // the framework's tests change directory
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  = map[net.Conn]struct{}{}
		closed bool
	)
	track := func(cs ...net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return false
		}
		for _, c := range cs {
			conns[c] = struct{}{}
		}
		return true
	}
	forward := func(c net.Conn) {
		defer wg.Done()
		u, err := net.Dial("unix", path)
		if err != nil {
			c.Close()
			return
		}
		if !track(c, u) {
			c.Close()
			u.Close()
			return
		}
		done := make(chan struct{}, 2)
		go func() { io.Copy(u, c); done <- struct{}{} }()
		go func() { io.Copy(c, u); done <- struct{}{} }()
		<-done
		c.Close()
		u.Close()
		<-done
		mu.Lock()
		delete(conns, c)
		delete(conns, u)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go forward(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// TestTryFaults runs the contract's TryLock fault cases (a lost answer,
// a lost request, a context ending while cut off) on a real 3-member
// etcd cluster per case, the TryLock's client behind a relay.
func TestTryFaults(t *testing.T) {
	locktest.RunTryFaults(t, func(t *testing.T) locktest.Backend {
		return &etcdBackend{clus: newCluster(t)}
	})
}
