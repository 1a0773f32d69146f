package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

// memberTimeout is the session timeout of the connections under a server
// fault: short, so that two timeouts pass quickly, and 30 of the harness's
// 200 ms ticks.
const memberTimeout = 6 * time.Second

// memberTries is how many holders (or waiters) live through each fault at
// once, each with a connection, a session and a lock of its own.
const memberTries = 5

// serverFault is one way a server fails: apply makes server i fail and
// checks that it did; heal undoes it and waits until the ensemble is whole.
type serverFault struct {
	name  string
	apply func(t *testing.T, e *integration.ZooKeeperEnsemble, i int)
	heal  func(t *testing.T, e *integration.ZooKeeperEnsemble, i int)
}

var serverFaults = []serverFault{
	{"SIGSTOP",
		func(t *testing.T, e *integration.ZooKeeperEnsemble, i int) {
			if err := e.Pause(i); err != nil {
				t.Fatal(err)
			}
			assertSilent(t, e, i)
		},
		func(t *testing.T, e *integration.ZooKeeperEnsemble, i int) {
			if err := e.Resume(i); err != nil {
				t.Fatal(err)
			}
			waitHealthy(t, e)
		}},
	{"kill",
		func(t *testing.T, e *integration.ZooKeeperEnsemble, i int) {
			if err := e.Kill(i); err != nil {
				t.Fatal(err)
			}
			assertSilent(t, e, i)
		},
		func(t *testing.T, e *integration.ZooKeeperEnsemble, i int) {
			if err := e.Restart(testCtx(t), i); err != nil {
				t.Fatal(err)
			}
			waitHealthy(t, e)
		}},
	{"cut",
		func(t *testing.T, e *integration.ZooKeeperEnsemble, i int) {
			e.Cut(i)
			// The cut took effect when the server itself (asked directly,
			// around its proxies) has lost its leader and stopped serving.
			ctx := testCtx(t)
			for {
				m, err := e.Servers[i].Mode(ctx)
				if err == nil && m == "" {
					return
				}
				select {
				case <-ctx.Done():
					t.Fatalf("server %d cut off, but it still serves as %q (%v): the cut did not take effect", i, m, err)
				case <-time.After(50 * time.Millisecond):
				}
			}
		},
		func(t *testing.T, e *integration.ZooKeeperEnsemble, i int) {
			e.Heal(i)
			waitHealthy(t, e)
		}},
}

// assertSilent checks that server i, asked directly, does not answer.
func assertSilent(t *testing.T, e *integration.ZooKeeperEnsemble, i int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if m, err := e.Servers[i].Mode(ctx); err == nil {
		t.Fatalf("server %d still answers (mode %q): the fault did not take effect", i, m)
	}
}

func waitHealthy(t *testing.T, e *integration.ZooKeeperEnsemble) {
	t.Helper()
	if err := e.WaitHealthy(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

// connectedTo returns n connections that know every server, as a
// production client would, and are connected to server i: the one whose
// failure is under test. (go-zookeeper picks a server at random.)
func connectedTo(t *testing.T, e *integration.ZooKeeperEnsemble, i, n int) []*zk.Conn {
	t.Helper()
	var conns []*zk.Conn
	for try := 0; len(conns) < n; try++ {
		if try == 100 {
			t.Fatalf("%d connections, none of the last %d to server %d", len(conns), try, i)
		}
		conn, events, err := e.ConnectTimeout(testCtx(t), memberTimeout)
		if err != nil {
			t.Fatal(err)
		}
		drain(events)
		if conn.Server() != e.Servers[i].Addr() {
			conn.Close()
			continue
		}
		t.Cleanup(conn.Close)
		conns = append(conns, conn)
	}
	return conns
}

// TestOneServerDown freezes (SIGSTOP), kills or cuts off one follower of a
// 3-server ensemble for two session timeouts while holders and waiters
// whose connections know all three servers, and are connected to that
// very follower, use it. Two healthy servers are there to serve them, so
// every holder must keep its lock (Done not closed, its node still the
// oldest entry, with its token) and every waiter its place; once the
// holders release, every waiter acquires. memberTries holders (or
// waiters) go through each fault at once, on locks of their own.
func TestOneServerDown(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	for _, f := range serverFaults {
		t.Run(f.name+"/holder", func(t *testing.T) { holdersThroughFault(t, ens, admin, f) })
		t.Run(f.name+"/waiter", func(t *testing.T) { waitersThroughFault(t, ens, admin, f) })
	}
}

// follower returns a follower of e.
func follower(t *testing.T, e *integration.ZooKeeperEnsemble) int {
	t.Helper()
	lead, err := e.Leader(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return (lead + 1) % 3
}

// stillHeld checks that l is held and its node is still the oldest entry
// of its lock, with l's token as its czxid.
func stillHeld(t *testing.T, admin *zk.Conn, dir string, l *distlock.Lease, what string) error {
	t.Helper()
	if err := l.Err(); err != nil {
		return fmt.Errorf("%s lost its lock: %w", what, err)
	}
	es := entries(t, admin, dir)
	if len(es) == 0 {
		return fmt.Errorf("%s: %s has no entry", what, dir)
	}
	_, st, err := admin.Get(dir + "/" + es[0])
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if st.Czxid != l.Token().Seq {
		return fmt.Errorf("%s: the oldest entry %s (czxid %d) is not the holder's (token %v)", what, es[0], st.Czxid, l.Token())
	}
	return nil
}

func holdersThroughFault(t *testing.T, e *integration.ZooKeeperEnsemble, admin *zk.Conn, f serverFault) {
	prefix := newPrefix()
	victim := follower(t, e)
	conns := connectedTo(t, e, victim, memberTries)
	leases := make([]*distlock.Lease, memberTries)
	moves := make([]*moveLog, memberTries)
	for i, conn := range conns {
		moves[i] = &moveLog{}
		log := slog.New(moves[i].handler(debugLog(t, fmt.Sprintf("holder %d", i)).Handler()))
		s := newSession(t, conn, recipe.WithPrefix(prefix), recipe.WithLogger(log))
		leases[i] = mustLock(t, newMutex(t, s, fmt.Sprintf("h%d", i)))
	}
	// Healed however the test ends, also when apply finds that the fault
	// did not take effect.
	healed := false
	defer func() {
		if !healed {
			f.heal(t, e, victim)
		}
	}()
	f.apply(t, e, victim)
	lost := watchLost(leases)
	select {
	case i := <-lost:
		t.Fatalf("holder %d lost its lock with server %d down (%s): %v", i, victim, f.name, leases[i].Err())
	case <-time.After(2 * memberTimeout):
	}
	kept := 0
	for i, l := range leases {
		if err := stillHeld(t, admin, fmt.Sprintf("%s/h%d", prefix, i), l, fmt.Sprintf("holder %d", i)); err != nil {
			t.Error(err)
			continue
		}
		kept++
	}
	t.Logf("%s: %d of %d holders kept their locks for %v", f.name, kept, len(leases), 2*memberTimeout)
	// Every holder was on the failed server: each must have moved to
	// another one. From a frozen or cut-off server the move comes only
	// once go-zookeeper gives up on it, with a Sync stuck until then, and
	// the session must have been confirmed again on the new server. (A
	// killed server's connections close at once, usually with no Sync in
	// flight.)
	for i, m := range moves {
		servers := m.list()
		if len(servers) == 0 && f.name != "kill" {
			t.Errorf("holder %d: its session was never confirmed again after its Sync failed: did the fault reach it?", i)
		}
		for _, a := range servers {
			if a == e.Servers[victim].Addr() {
				t.Errorf("holder %d: session confirmed again through the failed server %d", i, victim)
			}
		}
		if conns[i].Server() == e.Servers[victim].Addr() {
			t.Errorf("holder %d: still connected to the failed server %d", i, victim)
		}
	}
	f.heal(t, e, victim)
	healed = true
	for _, l := range leases {
		mustUnlock(t, l)
	}
}

func waitersThroughFault(t *testing.T, e *integration.ZooKeeperEnsemble, admin *zk.Conn, f serverFault) {
	prefix := newPrefix()
	victim := follower(t, e)
	// The holders are connected to the healthy servers only: the waiters
	// are under test here.
	hconn, hev := connect(t, e, (victim+1)%3, (victim+2)%3)
	drain(hev)
	hs := newSession(t, hconn, recipe.WithPrefix(prefix))
	conns := connectedTo(t, e, victim, memberTries)
	holders := make([]*distlock.Lease, memberTries)
	sessions := make([]*zklock.Session, memberTries)
	results := make([]<-chan result, memberTries)
	for i, conn := range conns {
		name := fmt.Sprintf("w%d", i)
		holders[i] = mustLock(t, newMutex(t, hs, name))
		sessions[i] = newSession(t, conn, recipe.WithPrefix(prefix), recipe.WithLogger(debugLog(t, fmt.Sprintf("waiter %d", i))))
		results[i] = lockAsync(testCtx(t), newMutex(t, sessions[i], name))
		waitEntries(t, admin, prefix+"/"+name, 2)
	}
	// Healed however the test ends, also when apply finds that the fault
	// did not take effect.
	healed := false
	defer func() {
		if !healed {
			f.heal(t, e, victim)
		}
	}()
	f.apply(t, e, victim)
	ended := make(chan int, memberTries)
	for i, s := range sessions {
		go func() {
			select {
			case <-s.Done():
				ended <- i
			case <-t.Context().Done():
			}
		}()
	}
	select {
	case i := <-ended:
		t.Fatalf("waiter %d's session ended with server %d down (%s): %v", i, victim, f.name, sessions[i].Err())
	case <-time.After(2 * memberTimeout):
	}
	for i, res := range results {
		select {
		case r := <-res:
			t.Fatalf("waiter %d returned while its lock is held (err %v)", i, r.Err)
		default:
		}
	}
	// Released while the server is still down: the waiters hear it once
	// their connections have moved to a healthy server.
	for _, h := range holders {
		mustUnlock(t, h)
	}
	acquired := 0
	for i, res := range results {
		r := recv(t, res, fmt.Sprintf("waiter %d with server %d down (%s)", i, victim, f.name))
		if r.Err != nil {
			t.Fatalf("waiter %d: %v", i, r.Err)
		}
		if !r.Lease.Token().Newer(holders[i].Token()) {
			t.Fatalf("waiter %d: token %v not newer than %v", i, r.Lease.Token(), holders[i].Token())
		}
		acquired++
		mustUnlock(t, r.Lease)
	}
	t.Logf("%s: %d of %d waiters kept their places for %v and acquired after the release", f.name, acquired, len(holders), 2*memberTimeout)
	f.heal(t, e, victim)
	healed = true
}

// watchLost reports the index of every lease that is lost (not
// released).
func watchLost(leases []*distlock.Lease) <-chan int {
	lost := make(chan int, len(leases))
	for i, l := range leases {
		go func() {
			<-l.Done()
			if !errors.Is(l.Err(), distlock.ErrReleased) {
				lost <- i
			}
		}()
	}
	return lost
}

// moveLog collects, from a session's log, the servers through which the
// session was confirmed alive again after a failed Sync.
type moveLog struct {
	mu      sync.Mutex
	servers []string
}

func (m *moveLog) list() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.servers...)
}

// handler returns a slog.Handler that records into m and passes every
// record on to next.
func (m *moveLog) handler(next slog.Handler) slog.Handler { return moveHandler{m, next} }

type moveHandler struct {
	m    *moveLog
	next slog.Handler
}

func (x moveHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || x.next.Enabled(ctx, l)
}

func (x moveHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "zklock: session confirmed again" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "server" {
				x.m.mu.Lock()
				x.m.servers = append(x.m.servers, a.Value.String())
				x.m.mu.Unlock()
			}
			return true
		})
	}
	if x.next.Enabled(ctx, r.Level) {
		return x.next.Handle(ctx, r)
	}
	return nil
}

func (x moveHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return moveHandler{x.m, x.next.WithAttrs(as)}
}

func (x moveHandler) WithGroup(g string) slog.Handler {
	return moveHandler{x.m, x.next.WithGroup(g)}
}

type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// debugLog returns a logger that writes to the test's log when
// DISTLOCK_DEBUG is set, and nowhere otherwise.
func debugLog(t *testing.T, who string) *slog.Logger {
	if os.Getenv("DISTLOCK_DEBUG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelDebug})).With("who", who)
}
