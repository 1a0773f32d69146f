package integration_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/integration"
	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdPutAsync puts key through cli in the background.
func etcdPutAsync(ctx context.Context, cli *clientv3.Client, key string) <-chan error {
	res := make(chan error, 1)
	go func() {
		_, err := cli.Put(ctx, key, "v")
		res <- err
	}()
	return res
}

// etcdAwaitKey waits, on a watch of cli, until key exists.
func etcdAwaitKey(ctx context.Context, t *testing.T, cli *clientv3.Client, key string) {
	t.Helper()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := cli.Watch(wctx, key, clientv3.WithCreatedNotify())
	if _, ok := <-wch; !ok { // created: the watch sees every put from here on
		t.Fatalf("watch %s: %v", key, ctx.Err())
	}
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) > 0 {
		return
	}
	for r := range wch {
		if len(r.Events) > 0 {
			return
		}
	}
	t.Fatalf("waiting for %s: %v", key, ctx.Err())
}

// notAnswered fails the test if res answers within a moment.
func notAnswered(t *testing.T, res <-chan error, what string) {
	t.Helper()
	select {
	case err := <-res:
		t.Fatalf("%s was answered (%v) while it should be held", what, err)
	case <-time.After(200 * time.Millisecond):
	}
}

// answered waits for res and fails the test on an error.
func answered(ctx context.Context, t *testing.T, res <-chan error, what string) {
	t.Helper()
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-ctx.Done():
		t.Fatalf("%s was not answered: %v", what, ctx.Err())
	}
}

// TestEtcdClientRelay holds the members' replies to one client, and cuts
// that client off: the other clients and the members themselves go on.
func TestEtcdClientRelay(t *testing.T) {
	c := integration.NewEtcd(t)
	ctx := ctxFor(t, 2*time.Minute)
	observer, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	cli, relay, err := c.RelayedClient()
	if err != nil {
		t.Fatal(err)
	}
	if err := putGet(ctx, cli, "relayed"); err != nil {
		t.Fatal(err)
	}

	t.Run("hold-replies", func(t *testing.T) {
		release, err := relay.HoldReplies()
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		res := etcdPutAsync(ctx, cli, "held")
		// Applied: the observer sees it, and is answered itself.
		etcdAwaitKey(ctx, t, observer, "held")
		if err := putGet(ctx, observer, "observer-during-hold"); err != nil {
			t.Fatal(err)
		}
		notAnswered(t, res, "the put")
		release()
		answered(ctx, t, res, "the held put after release")
		release() // again: nothing
		if err := putGet(ctx, cli, "after-release"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("cut", func(t *testing.T) {
		heal, err := relay.Cut()
		if err != nil {
			t.Fatal(err)
		}
		defer heal()
		res := etcdPutAsync(ctx, cli, "cut")
		notAnswered(t, res, "the put")
		// Not applied, while the members keep their quorum and serve the
		// others.
		if err := putGet(ctx, observer, "observer-during-cut"); err != nil {
			t.Fatal(err)
		}
		if r, err := observer.Get(ctx, "cut"); err != nil || len(r.Kvs) != 0 {
			t.Fatalf("the cut client's put reached the members (%v, %v)", r, err)
		}
		if _, err := c.Leader(ctx); err != nil {
			t.Fatal(err)
		}
		heal()
		answered(ctx, t, res, "the put after the heal")
		etcdAwaitKey(ctx, t, observer, "cut")
	})

	t.Run("cut-reset", func(t *testing.T) {
		heal, err := relay.Cut()
		if err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		res := etcdPutAsync(pctx, cli, "reset")
		notAnswered(t, res, "the put")
		relay.Reset()
		heal()
		// Lost with the connection, or retried on a new one: either way
		// the client works again once it has noticed and reconnected
		// (a request sent on a connection it has not seen close yet
		// fails: nothing tells a client of a reset but the next read).
		<-res
		if err := poll(ctx, func() error { return putGet(ctx, cli, "after-reset") }); err != nil {
			t.Fatal(err)
		}
	})
}

// TestZooKeeperCutClient cuts one client off from every server: its
// requests wait until the heal, the servers keep serving the others; cut
// off past its session timeout, it finds its session expired.
func TestZooKeeperCutClient(t *testing.T) {
	e := integration.NewZooKeeper(t)
	ctx := ctxFor(t, 2*time.Minute)
	observer, _, err := e.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("healed", func(t *testing.T) {
		c, events, err := e.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sid := c.SessionID()
		heal, err := e.CutClient(c)
		if err != nil {
			t.Fatal(err)
		}
		defer heal()
		res := zkCreateAsync(c, "/cut-healed")
		notAnswered(t, res, "the create")
		if err := zkWrite(ctx, observer, "/observer-during-cut"); err != nil {
			t.Fatal(err)
		}
		if ok, _, err := observer.Exists("/cut-healed"); err != nil || ok {
			t.Fatalf("the cut client's create reached the servers (%v, %v)", ok, err)
		}
		heal()
		// Delivered on the same connection, or (if the client gave up on
		// it meanwhile) failed and the client reconnected: either way the
		// session lives on.
		if err := <-res; err != nil && !errors.Is(err, zk.ErrConnectionClosed) {
			t.Fatalf("create after the heal: %v", err)
		}
		if c.State() != zk.StateHasSession {
			if _, err := zkAwaitState(ctx, events, zk.StateHasSession); err != nil {
				t.Fatal(err)
			}
		}
		if c.SessionID() != sid {
			t.Fatalf("session %#x after the heal, want %#x", c.SessionID(), sid)
		}
		if err := zkWrite(ctx, c, "/after-cut"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("expired", func(t *testing.T) {
		c, events, err := e.ConnectTimeout(ctx, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Create("/cut-ephemeral", []byte("v"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		ok, _, gone, err := observer.ExistsW("/cut-ephemeral")
		if err != nil || !ok {
			t.Fatalf("ephemeral node: %v %v", ok, err)
		}
		heal, err := e.CutClient(c)
		if err != nil {
			t.Fatal(err)
		}
		defer heal()
		// The servers hear nothing from the client: they expire its
		// session and delete its node.
		select {
		case ev := <-gone:
			if ev.Type != zk.EventNodeDeleted {
				t.Fatalf("watch: %v", ev)
			}
		case <-ctx.Done():
			t.Fatal("the cut client's session did not expire")
		}
		heal()
		if _, err := zkAwaitState(ctx, events, zk.StateExpired); err != nil {
			t.Fatal(err)
		}
	})
}
