package etcdlock_test

import (
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestOverTLS runs the recipes on a real 3-member etcd that speaks TLS
// only (client and peer) with client-certificate auth and etcd's
// authentication on, through clients configured as a user would: the CA,
// a client certificate and user/password. A Mutex hands over in order with
// growing tokens, and an election hands over on Resign.
func TestOverTLS(t *testing.T) {
	t.Parallel()
	const password = "tls-test-pw"
	c := integration.NewEtcd(t, integration.WithTLS(), integration.WithAuth(password))
	ctx := testCtx(t)
	client := func(member int) *clientv3.Client {
		t.Helper()
		tc, err := c.TLS.ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   []string{c.Members[member].ClientURL()},
			TLS:         tc,
			Username:    integration.RootUser,
			Password:    password,
			DialTimeout: 5 * time.Second,
			Logger:      zap.NewNop(),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return cli
	}
	a, b := client(0), client(1)
	// A TTL long enough for a loaded machine, short enough that the test
	// sees keepalives confirmed over TLS with a logged-in user.
	const ttl = 5 * time.Second
	sa := newSession(t, a, etcdlock.WithTTL(ttl))
	sb := newSession(t, b, etcdlock.WithTTL(ttl))

	t.Run("keepalive", func(t *testing.T) {
		first := sa.Deadline()
		for sa.Deadline().Equal(first) {
			select {
			case <-sa.Done():
				t.Fatalf("session lost: %v", sa.Err())
			case <-ctx.Done():
				t.Fatal("no keepalive confirmed")
			case <-time.After(50 * time.Millisecond):
			}
		}
	})

	t.Run("mutex", func(t *testing.T) {
		first := mustLock(t, newMutex(t, sa, "tls"))
		qw := watchQueue(t, b, "tls")
		res := lockAsync(ctx, newMutex(t, sb, "tls"))
		qw.nextPut()
		mustUnlock(t, first)
		second := successor(t, res, first.Token(), "the waiter over TLS")
		if !second.Token().Newer(first.Token()) {
			t.Fatalf("token %v after %v: want newer", second.Token(), first.Token())
		}
		mustUnlock(t, second)
		if keys := queueKeys(t, a, "tls"); len(keys) != 0 {
			t.Fatalf("entries left: %v", keys)
		}
	})

	t.Run("election", func(t *testing.T) {
		ea, err := recipe.NewElection(sa, "tls-election")
		if err != nil {
			t.Fatal(err)
		}
		eb, err := recipe.NewElection(sb, "tls-election")
		if err != nil {
			t.Fatal(err)
		}
		la, err := ea.Campaign(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if info, err := eb.Leader(ctx); err != nil || info.Value != "a" {
			t.Fatalf("leader seen by b: %+v, %v; want a", info, err)
		}
		obs := eb.Observe(ctx)
		if info := recv(t, obs, "first observation"); info.Value != "a" {
			t.Fatalf("observed %+v, want a", info)
		}
		type won struct {
			l   distlock.Leadership
			err error
		}
		bwon := make(chan won, 1)
		go func() {
			l, err := eb.Campaign(ctx, "b")
			bwon <- won{l, err}
		}()
		if err := la.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		w := recv(t, bwon, "b's campaign")
		if w.err != nil {
			t.Fatal(w.err)
		}
		if !w.l.Token().Newer(la.Token()) {
			t.Fatalf("b's token %v after a's %v: want newer", w.l.Token(), la.Token())
		}
		for info := recv(t, obs, "next observation"); info.Value != "b"; info = recv(t, obs, "next observation") {
		}
		if err := w.l.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
