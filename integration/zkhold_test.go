package integration_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
	"github.com/go-zookeeper/zk"
)

// zkAwaitNode waits, on a watch of conn, until path exists.
func zkAwaitNode(ctx context.Context, t *testing.T, conn *zk.Conn, path string) {
	t.Helper()
	for {
		ok, _, ch, err := conn.ExistsW(path)
		if err != nil {
			t.Fatalf("watch %s: %v", path, err)
		}
		if ok {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", path, ctx.Err())
		}
	}
}

// TestZooKeeperHoldReplies holds the server's answers to one client: its
// create is applied (another client sees the node) but not answered until
// the hold is released; dropped instead, the answer is lost and the
// client, reconnected within its session, gets ErrConnectionClosed.
func TestZooKeeperHoldReplies(t *testing.T) {
	e := integration.NewZooKeeper(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	observer, _, err := e.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("released", func(t *testing.T) {
		c, _, err := e.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		release, err := e.HoldReplies(c)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		res := zkCreateAsync(c, "/held-released")
		zkAwaitNode(ctx, t, observer, "/held-released")
		// Other clients are not held: the observer still gets answers.
		if err := zkWrite(ctx, observer, "/observer-during-hold"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-res:
			t.Fatalf("the create was answered (%v) while its replies were held", err)
		case <-time.After(200 * time.Millisecond):
		}
		release()
		select {
		case err := <-res:
			if err != nil {
				t.Fatalf("held create after release: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("the held answer was not delivered on release")
		}
		if err := zkWrite(ctx, c, "/after-release"); err != nil {
			t.Fatal(err)
		}
		release() // again: nothing
	})

	t.Run("dropped", func(t *testing.T) {
		c, events, err := e.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sid := c.SessionID()
		release, err := e.HoldReplies(c)
		if err != nil {
			t.Fatal(err)
		}
		res := zkCreateAsync(c, "/held-dropped")
		zkAwaitNode(ctx, t, observer, "/held-dropped")
		if err := e.DropConnection(c); err != nil {
			t.Fatal(err)
		}
		// The held Read returns when its connection is closed: the client
		// fails the request and reconnects.
		select {
		case err := <-res:
			if !errors.Is(err, zk.ErrConnectionClosed) {
				t.Fatalf("create whose answer was lost: %v, want ErrConnectionClosed", err)
			}
		case <-ctx.Done():
			t.Fatal("the held client did not notice its connection was dropped")
		}
		release() // after the drop: harmless
		release()
		if _, err := zkAwaitState(ctx, events, zk.StateHasSession); err != nil {
			t.Fatal(err)
		}
		if c.SessionID() != sid {
			t.Fatalf("session %#x after the drop, want %#x", c.SessionID(), sid)
		}
		// The new connection is not held.
		if err := zkWrite(ctx, c, "/after-drop-held"); err != nil {
			t.Fatal(err)
		}
		if err := zkHas(ctx, c, "/held-dropped"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("receive timeout", func(t *testing.T) {
		// Never released: the client hears nothing for its receive timeout,
		// gives up on the connection and reconnects, within its session.
		c, events, err := e.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sid := c.SessionID()
		release, err := e.HoldReplies(c)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		res := zkCreateAsync(c, "/held-timeout")
		zkAwaitNode(ctx, t, observer, "/held-timeout")
		select {
		case err := <-res:
			if !errors.Is(err, zk.ErrConnectionClosed) {
				t.Fatalf("create held past the receive timeout: %v, want ErrConnectionClosed", err)
			}
		case <-ctx.Done():
			t.Fatal("the held client never timed out")
		}
		if _, err := zkAwaitState(ctx, events, zk.StateHasSession); err != nil {
			t.Fatal(err)
		}
		if c.SessionID() != sid {
			t.Fatalf("session %#x after the timeout, want %#x", c.SessionID(), sid)
		}
		if err := zkWrite(ctx, c, "/after-timeout"); err != nil {
			t.Fatal(err)
		}
	})
}
