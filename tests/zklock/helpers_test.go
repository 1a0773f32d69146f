package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/locktest"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

// testTimeout bounds every wait in these tests: generous, since it is a
// failure bound, not a timing assertion.
const testTimeout = 60 * time.Second

var prefixes atomic.Int64

// newPrefix returns a znode prefix no other test uses, so that tests can
// share one ensemble.
func newPrefix() string { return fmt.Sprintf("/t%d", prefixes.Add(1)) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// connect opens a connection with a session of its own to the ensemble (to
// the given servers only, if any), closed when the test ends.
func connect(t *testing.T, ens *integration.ZooKeeperEnsemble, servers ...int) (*zk.Conn, <-chan zk.Event) {
	t.Helper()
	conn, events, err := ens.Connect(testCtx(t), servers...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn, events
}

func newSession(t *testing.T, conn *zk.Conn, opts ...recipe.Option) *zklock.Session {
	t.Helper()
	// The harness's servers tick every 200 ms: tell the session, so its
	// client-side deadline is as late as they allow (option order: the
	// caller's opts come last and win).
	opts = append([]recipe.Option{zklock.WithTickTime(integration.ZooKeeperTickTime)}, opts...)
	s, err := zklock.NewSession(testCtx(t), conn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func newMutex(t *testing.T, s *zklock.Session, name string) *recipe.Mutex {
	t.Helper()
	m, err := recipe.NewMutex(s, name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// isEntry reports whether a child of a lock's directory is an entry: a
// lock's ("@w-", "@r-") or an election's candidate ("@e-", with
// "p<prio>-" before its sequence number unless its priority is 0).
func isEntry(child string) bool {
	const n = 3 + 32 + 1 + 10
	switch {
	case strings.HasPrefix(child, "@w-") || strings.HasPrefix(child, "@r-"):
		return len(child) == n
	case strings.HasPrefix(child, "@e-"):
		return len(child) == n || len(child) > n && child[n-10] == 'p'
	}
	return false
}

// entries lists the lock entries in dir, oldest first, as the leader sees
// them (a sync first).
func entries(t *testing.T, conn *zk.Conn, dir string) []string {
	t.Helper()
	for {
		_, err := conn.Sync(dir)
		var children []string
		if err == nil {
			children, _, err = conn.Children(dir)
		}
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err == nil {
			var out []string
			for _, c := range children {
				if isEntry(c) {
					out = append(out, c)
				}
			}
			slices.SortFunc(out, func(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) })
			return out
		}
		if !errors.Is(err, zk.ErrConnectionClosed) && !errors.Is(err, zk.ErrNoServer) {
			t.Fatalf("list %s: %v", dir, err)
		}
		if testCtx(t).Err() != nil {
			t.Fatalf("list %s: %v", dir, err)
		}
	}
}

// waitEntries blocks until dir has at least n lock entries, waiting on
// watches.
func waitEntries(t *testing.T, conn *zk.Conn, dir string, n int) {
	t.Helper()
	waitChildren(t, conn, dir, n, isEntry)
}

// waitChildren blocks until dir has at least n children that count says
// to count, waiting on watches.
func waitChildren(t *testing.T, conn *zk.Conn, dir string, n int, count func(child string) bool) {
	t.Helper()
	ctx := testCtx(t)
	for {
		children, _, ch, err := conn.ChildrenW(dir)
		if errors.Is(err, zk.ErrNoNode) {
			var ok bool
			ok, _, ch, err = conn.ExistsW(dir)
			if err == nil && ok {
				continue
			}
		}
		if err != nil {
			t.Fatalf("watch %s: %v", dir, err)
		}
		have := 0
		for _, c := range children {
			if count(c) {
				have++
			}
		}
		if have >= n {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%s: %d entries, want %d: %v", dir, have, n, ctx.Err())
		}
	}
}

// waitEntriesAtMost waits, on child watches rather than polling, until dir
// has at most max lock entries or d has passed, and returns its entries
// then.
func waitEntriesAtMost(t *testing.T, conn *zk.Conn, dir string, max int, d time.Duration) []string {
	t.Helper()
	timeout := time.After(d)
	for {
		children, _, ch, err := conn.ChildrenW(dir)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			t.Fatalf("watch %s: %v", dir, err)
		}
		if n := len(slices.DeleteFunc(children, func(c string) bool { return !isEntry(c) })); n <= max {
			return entries(t, conn, dir)
		}
		select {
		case <-ch:
		case <-timeout:
			return entries(t, conn, dir)
		}
	}
}

// awaitState reads a connection's events until it reports want.
func awaitState(t *testing.T, events <-chan zk.Event, want zk.State) {
	t.Helper()
	ctx := testCtx(t)
	var seen []zk.State
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("events closed before %v (saw %v)", want, seen)
			}
			if ev.Type != zk.EventSession {
				continue
			}
			seen = append(seen, ev.State)
			if ev.State == want {
				return
			}
		case <-ctx.Done():
			t.Fatalf("waiting for %v: %v (saw %v)", want, ctx.Err(), seen)
		}
	}
}

// drain discards a connection's events in the background.
func drain(events <-chan zk.Event) {
	go func() {
		for range events {
		}
	}()
}

var (
	mustLock   = locktest.MustLock
	mustUnlock = locktest.MustUnlock
)

// zkBackend runs the shared lock contract on one ensemble, each case under
// a prefix of its own.
type zkBackend struct {
	ens    *integration.ZooKeeperEnsemble
	admin  *zk.Conn
	prefix string
	n      int
}

func newBackend(t *testing.T, ens *integration.ZooKeeperEnsemble, admin *zk.Conn) *zkBackend {
	return &zkBackend{ens: ens, admin: admin, prefix: newPrefix()}
}

func (b *zkBackend) Session(t *testing.T) locktest.Session {
	conn, events := connect(t, b.ens, b.n%3)
	drain(events)
	b.n++
	return &zkSession{ens: b.ens, conn: conn, s: newSession(t, conn, recipe.WithPrefix(b.prefix))}
}

func (b *zkBackend) ObservedSession(t *testing.T, o locktest.Observed) locktest.Session {
	var conn *zk.Conn
	var events <-chan zk.Event
	if o.Short {
		var err error
		if conn, events, err = b.ens.ConnectTimeout(testCtx(t), 3*time.Second, b.n%3); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
	} else {
		conn, events = connect(t, b.ens, b.n%3)
	}
	drain(events)
	b.n++
	opts := []recipe.Option{recipe.WithPrefix(b.prefix), recipe.WithMeterProvider(o.MeterProvider), recipe.WithTracerProvider(o.TracerProvider), recipe.WithNameNormalizer(o.NameNormalizer)}
	if o.Revocable {
		opts = append(opts, recipe.WithRevocable())
	}
	s := newSession(t, conn, opts...)
	return &zkSession{ens: b.ens, conn: conn, s: s}
}

func (b *zkBackend) Revoke(ctx context.Context, name string, r distlock.RevokeRequest) ([]distlock.Revocation, error) {
	a, err := zklock.NewAdmin(b.admin, b.prefix)
	if err != nil {
		return nil, err
	}
	return a.Revoke(ctx, name, r)
}

func (b *zkBackend) Revocations(ctx context.Context, name string) ([]distlock.Revocation, error) {
	a, err := zklock.NewAdmin(b.admin, b.prefix)
	if err != nil {
		return nil, err
	}
	return a.Revocations(ctx, name)
}

func (b *zkBackend) Entries(t *testing.T, name string) []string {
	return entries(t, b.admin, b.prefix+"/"+name)
}

func (b *zkBackend) WaitEntries(t *testing.T, name string, n int) {
	waitEntries(t, b.admin, b.prefix+"/"+name, n)
}

type zkSession struct {
	ens  *integration.ZooKeeperEnsemble
	conn *zk.Conn
	s    *zklock.Session
}

func (s *zkSession) Mutex(name string) (distlock.Locker, error) { return recipe.NewMutex(s.s, name) }

func (s *zkSession) MultiMutex(names ...string) (distlock.Locker, error) {
	return recipe.NewMultiMutex(s.s, names...)
}

// End expires the session on the servers, for real.
func (s *zkSession) End(t *testing.T) {
	if err := s.ens.ExpireSession(testCtx(t), s.conn); err != nil {
		t.Fatal(err)
	}
}

// Cut closes the session's connection.
func (s *zkSession) Cut(t *testing.T) { s.conn.Close() }

func (s *zkSession) Close(t *testing.T) {
	if err := s.s.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

// The background-Lock helpers of the contract suite serve these tests too.
type result = locktest.Result

var lockAsync = locktest.LockAsync

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	return locktest.Recv(t, ch, what)
}

func (s *zkSession) RWMutex(name string) (locktest.RWLocker, error) {
	m, err := recipe.NewRWMutex(s.s, name)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (s *zkSession) Election(name string) (locktest.Elector, error) {
	e, err := recipe.NewElection(s.s, name)
	if err != nil {
		return nil, err
	}
	return e, nil
}

func (s *zkSession) Semaphore(name string, n int) (locktest.Semaphore, error) {
	return recipe.NewSemaphore(s.s, name, n)
}

// SemaphoreEntries lists the line ("@c-" children) and the slots (the
// children of @permits).
func (b *zkBackend) SemaphoreEntries(t *testing.T, name string) (line, slots []string) {
	t.Helper()
	dir := b.prefix + "/" + name
	kids, _, err := b.admin.Children(dir)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	for _, c := range kids {
		if strings.HasPrefix(c, "@c-") {
			line = append(line, c)
		}
	}
	slots, _, err = b.admin.Children(dir + "/@permits")
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	return line, slots
}

// WaitLine waits on child watches until the line has n entries.
func (b *zkBackend) WaitLine(t *testing.T, name string, n int) {
	t.Helper()
	waitChildren(t, b.admin, b.prefix+"/"+name, n, func(c string) bool { return strings.HasPrefix(c, "@c-") })
}

func (s *zkSession) TTL() time.Duration { return s.s.TTL() }

// DeletionOrder sets an exists watch on every key from a connection of its
// own: a connection delivers its watch events in zxid order, and its
// event channel carries them all.
func (b *zkBackend) DeletionOrder(t *testing.T, name string, keys []string) func() ([]string, []time.Time) {
	t.Helper()
	conn, events := connect(t, b.ens)
	dir := b.prefix + "/" + name
	paths := map[string]string{} // path: key
	for _, k := range keys {
		p := dir + "/" + k
		if !strings.HasPrefix(k, "@") {
			p = dir + "/@permits/" + k // a semaphore's slot
		}
		ok, _, _, err := conn.ExistsW(p)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("DeletionOrder: %s is not there", p)
		}
		paths[p] = k
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	type deletion struct {
		key string
		at  time.Time
	}
	// Read as the events come, so that each is stamped when it arrived.
	seen := make(chan deletion, len(keys))
	go func() {
		defer close(seen)
		for n := 0; n < len(keys); {
			var ev zk.Event
			select {
			case ev = <-events:
			case <-ctx.Done():
				return
			}
			k, ok := paths[ev.Path]
			gone := false
			switch {
			case !ok:
			case ev.Type == zk.EventNodeDeleted:
				gone = true
			case ev.Type == zk.EventNodeDataChanged:
				// A data change (a release marks its entry) used the
				// watch up: set it again. Gone by then, its deletion is
				// taken to come now, after every event before the answer.
				there, _, _, err := conn.ExistsW(ev.Path)
				gone = err == nil && !there
			}
			if gone {
				seen <- deletion{k, time.Now()}
				n++
			}
		}
	}()
	return func() ([]string, []time.Time) {
		t.Helper()
		defer cancel()
		defer conn.Close()
		var order []string
		var at []time.Time
		for len(order) < len(keys) {
			d, ok := <-seen
			if !ok {
				t.Fatalf("DeletionOrder: %q deleted of %q: %v", order, keys, ctx.Err())
			}
			order, at = append(order, d.key), append(at, d.at)
		}
		return order, at
	}
}
