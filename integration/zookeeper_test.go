package integration_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
	"github.com/go-zookeeper/zk"
)

var zkACL = zk.WorldACL(zk.PermAll)

// zkTransient reports whether a request failed only because the client
// was between servers: it retries on its own, so the test may too.
func zkTransient(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionMoved)
}

// zkWrite creates path through conn, or sets it if it exists, retrying
// while the client finds a server.
func zkWrite(ctx context.Context, conn *zk.Conn, path string) error {
	for {
		_, err := conn.Create(path, []byte("v"), 0, zkACL)
		if errors.Is(err, zk.ErrNodeExists) {
			_, err = conn.Set(path, []byte("v"), -1)
		}
		if err == nil || !zkTransient(err) {
			if err != nil {
				err = fmt.Errorf("write %s: %w", path, err)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("write %s: %w (last error: %v)", path, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// zkHas waits until path exists as conn's server sees it: a server that
// is catching up gets there.
func zkHas(ctx context.Context, conn *zk.Conn, path string) error {
	return poll(ctx, func() error {
		ok, _, err := conn.Exists(path)
		if err == nil && !ok {
			err = fmt.Errorf("%s does not exist (yet)", path)
		}
		return err
	})
}

// zkCreateAsync creates path through conn in the background, for writes
// that are not expected to finish.
func zkCreateAsync(conn *zk.Conn, path string) <-chan error {
	res := make(chan error, 1)
	go func() {
		_, err := conn.Create(path, []byte("v"), 0, zkACL)
		res <- err
	}()
	return res
}

// zkAwaitState reads a connection's events until it reports want, and
// returns the session states it saw on the way.
func zkAwaitState(ctx context.Context, events <-chan zk.Event, want zk.State) ([]zk.State, error) {
	var seen []zk.State
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return seen, fmt.Errorf("events closed before %v (saw %v)", want, seen)
			}
			if ev.Type != zk.EventSession {
				continue
			}
			seen = append(seen, ev.State)
			if ev.State == want {
				return seen, nil
			}
		case <-ctx.Done():
			return seen, fmt.Errorf("waiting for %v: %w (saw %v)", want, ctx.Err(), seen)
		}
	}
}

// zkWaitMode waits until server i says it is mode ("" for not serving).
func zkWaitMode(ctx context.Context, e *integration.ZooKeeperEnsemble, i int, mode string) error {
	return poll(ctx, func() error {
		m, err := e.Servers[i].Mode(ctx)
		if err == nil && m != mode {
			err = fmt.Errorf("%s is %q, want %q", e.Servers[i].Name, m, mode)
		}
		return err
	})
}

func testZooKeeperFaults(t *testing.T, provider integration.Provider) {
	e := integration.NewZooKeeper(t, integration.WithProvider(provider))
	ctx := ctxFor(t, 3*time.Minute)
	conn, _, err := e.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := zkWrite(ctx, conn, "/start"); err != nil {
		t.Fatal(err)
	}
	if err := zkHas(ctx, conn, "/start"); err != nil {
		t.Fatal(err)
	}

	t.Run("kill and restart", func(t *testing.T) {
		pid := e.Servers[1].PID()
		if err := e.Kill(1); err != nil {
			t.Fatal(err)
		}
		if st := pidState(pid); st != 0 {
			t.Fatalf("killed server's process %d is in state %c", pid, st)
		}
		if err := zkWrite(ctx, conn, "/killed"); err != nil {
			t.Fatal(err)
		}
		if err := e.Restart(ctx, 1); err != nil {
			t.Fatal(err)
		}
		s1, _, err := e.Connect(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		// The restarted server has its data and what was written while it
		// was down, and takes writes.
		for _, p := range []string{"/start", "/killed"} {
			if err := zkHas(ctx, s1, p); err != nil {
				t.Fatal(err)
			}
		}
		if err := zkWrite(ctx, s1, "/restarted"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("stop leader", func(t *testing.T) {
		old, err := e.StopLeader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lead, err := e.Leader(ctx)
		if err != nil || lead == old {
			t.Fatalf("leader after stopping %d: %d, %v", old, lead, err)
		}
		if err := zkWrite(ctx, conn, "/new-leader"); err != nil {
			t.Fatal(err)
		}
		if err := e.Restart(ctx, old); err != nil {
			t.Fatal(err)
		}
		// The old leader comes back as a follower of the new one.
		if err := zkWaitMode(ctx, e, old, "follower"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("pause", func(t *testing.T) {
		s2, _, err := e.Connect(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Pause(2); err != nil {
			t.Fatal(err)
		}
		if st := pidState(e.Servers[2].PID()); st != 'T' {
			t.Fatalf("paused server in state %c, want T", st)
		}
		select {
		case err := <-zkCreateAsync(s2, "/paused"):
			if err == nil {
				t.Fatal("a paused server took a write")
			}
		case <-time.After(time.Second):
		}
		if err := e.Resume(2); err != nil {
			t.Fatal(err)
		}
		if err := zkWrite(ctx, s2, "/resumed"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("cut and heal", func(t *testing.T) {
		if err := e.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
		lead, err := e.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f := (lead + 1) % len(e.Servers)
		mf, _, err := e.Connect(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if err := zkWrite(ctx, mf, "/before-cut"); err != nil {
			t.Fatal(err)
		}
		if err := e.Cut(f); err != nil {
			t.Fatal(err)
		}
		// A write through the cut-off server reaches nothing: it fails or
		// does not finish.
		select {
		case err := <-zkCreateAsync(mf, "/through-cut"):
			if err == nil {
				t.Fatal("a write through a cut-off server succeeded")
			}
		case <-time.After(2 * time.Second):
		}
		// Its quorum and election traffic is held both ways, so it leaves
		// the quorum (asked directly, it serves nothing)...
		if err := zkWaitMode(ctx, e, f, ""); err != nil {
			t.Fatal(err)
		}
		// ...and the rest write on, also through a client of every server,
		// which must not wait long on the cut-off one.
		short, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		rest, _, err := e.Connect(short)
		if err != nil {
			t.Fatal(err)
		}
		if err := zkWrite(short, rest, "/during-cut"); err != nil {
			t.Fatal(err)
		}
		if l, err := e.Leader(ctx); err != nil || l != lead {
			t.Fatalf("leader during the cut: %d, %v; want %d", l, err, lead)
		}
		e.Heal(f)
		// It rejoins and catches up.
		if err := zkWaitMode(ctx, e, f, "follower"); err != nil {
			t.Fatal(err)
		}
		mf2, _, err := e.Connect(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if err := zkHas(ctx, mf2, "/during-cut"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("expire session", func(t *testing.T) {
		if err := e.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
		testZooKeeperExpire(t, ctx, e)
	})

	t.Run("drop connection", func(t *testing.T) {
		testZooKeeperDrop(t, ctx, e)
	})
}

// testZooKeeperExpire expires a session for real: its ephemeral node goes,
// its connection sees StateExpired, and the client starts a new session.
func testZooKeeperExpire(t *testing.T, ctx context.Context, e *integration.ZooKeeperEnsemble) {
	victim, events, err := e.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	watcher, _, err := e.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := victim.Create("/eph", nil, zk.FlagEphemeral, zkACL); err != nil {
		t.Fatal(err)
	}
	sid := victim.SessionID()
	// The watcher may be on another server, which applies the create a
	// moment later: reads are local, so sync first.
	if _, err := watcher.Sync("/eph"); err != nil {
		t.Fatal(err)
	}
	ok, _, deleted, err := watcher.ExistsW("/eph")
	if err != nil || !ok {
		t.Fatalf("ephemeral node as another session sees it: %v, %v", ok, err)
	}
	if err := e.ExpireSession(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if _, err := zkAwaitState(ctx, events, zk.StateExpired); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-deleted:
		if ev.Type != zk.EventNodeDeleted {
			t.Fatalf("watch on the ephemeral node: %v", ev)
		}
	case <-ctx.Done():
		t.Fatal("the ephemeral node of an expired session was not deleted")
	}
	if ok, _, err := watcher.Exists("/eph"); err != nil || ok {
		t.Fatalf("ephemeral node after its session expired: exists %v, %v", ok, err)
	}
	if _, err := zkAwaitState(ctx, events, zk.StateHasSession); err != nil {
		t.Fatal(err)
	}
	if victim.SessionID() == sid {
		t.Fatalf("session %#x still in use after it expired", sid)
	}
}

// testZooKeeperDrop drops a connection: the client reconnects to the same
// session, whose ephemeral node stays.
func testZooKeeperDrop(t *testing.T, ctx context.Context, e *integration.ZooKeeperEnsemble) {
	c, events, err := e.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	watcher, _, err := e.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create("/eph-drop", nil, zk.FlagEphemeral, zkACL); err != nil {
		t.Fatal(err)
	}
	sid := c.SessionID()
	if err := e.DropConnection(c); err != nil {
		t.Fatal(err)
	}
	seen, err := zkAwaitState(ctx, events, zk.StateDisconnected)
	if err != nil {
		t.Fatal(err)
	}
	more, err := zkAwaitState(ctx, events, zk.StateHasSession)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append(seen, more...) {
		if s == zk.StateExpired {
			t.Fatalf("session expired on a dropped connection: %v %v", seen, more)
		}
	}
	if got := c.SessionID(); got != sid || c.State() != zk.StateHasSession {
		t.Fatalf("after a dropped connection: session %#x in %v, want %#x", got, c.State(), sid)
	}
	ok, st, err := watcher.Exists("/eph-drop")
	if err != nil || !ok || st.EphemeralOwner != sid {
		t.Fatalf("ephemeral node after a dropped connection: %v %+v %v", ok, st, err)
	}
	if err := zkWrite(ctx, c, "/after-drop"); err != nil {
		t.Fatal(err)
	}
}

func TestZooKeeperProcesses(t *testing.T) { testZooKeeperFaults(t, integration.Processes) }

// TestZooKeeperStandalone runs one server (ZooKeeper's standalone mode),
// where the harness must reattach a session on the server it is on.
func TestZooKeeperStandalone(t *testing.T) {
	e := integration.NewZooKeeper(t, integration.WithSize(1))
	ctx := ctxFor(t, 2*time.Minute)
	if lead, err := e.Leader(ctx); err != nil || lead != 0 {
		t.Fatalf("leader of one server: %d, %v", lead, err)
	}
	t.Run("expire session", func(t *testing.T) { testZooKeeperExpire(t, ctx, e) })
	t.Run("drop connection", func(t *testing.T) { testZooKeeperDrop(t, ctx, e) })
}

// TestZooKeeperTeardown checks that Close leaves no process, directory or
// port, and closes the connections.
func TestZooKeeperTeardown(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	e, err := integration.StartZooKeeper(ctx, integration.WithSize(1))
	if err != nil {
		t.Fatal(err)
	}
	conn, events, err := e.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := zkWrite(ctx, conn, "/x"); err != nil {
		t.Fatal(err)
	}
	pid := e.Servers[0].PID()
	addr := e.Servers[0].Addr()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("server process %d still runs", pid)
	}
	if dirs := leftoverDirs(t); len(dirs) > 0 {
		t.Errorf("directories left: %v", dirs)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("something still listens at %s", addr)
	}
	for {
		select {
		case _, ok := <-events:
			if ok {
				continue
			}
		case <-ctx.Done():
			t.Fatal("the connection's events were not closed")
		}
		break
	}
	if _, err := conn.Create("/y", nil, 0, zkACL); err == nil {
		t.Error("a closed ensemble's connection took a write")
	}
}
