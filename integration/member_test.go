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

// An etcd member removed (the leader, then a follower) and added back
// fresh: a client of every member keeps working meanwhile, the fresh
// member has the data, and a change asked of a degraded cluster is refused
// before anything changes.
func TestEtcdMemberChange(t *testing.T) {
	c := integration.NewEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "k", "v0"); err != nil {
		t.Fatal(err)
	}
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for n, i := range []int{lead, (lead + 1) % len(c.Members)} {
		if err := c.RemoveMember(ctx, i); err != nil {
			t.Fatalf("remove %s: %v", c.Members[i].Name, err)
		}
		if _, err := cli.Put(ctx, "k", "v1"); err != nil {
			t.Fatalf("put with %s removed: %v", c.Members[i].Name, err)
		}
		if err := c.AddMember(ctx, i); err != nil {
			t.Fatalf("add %s: %v", c.Members[i].Name, err)
		}
		if err := c.WaitFullMembership(ctx); err != nil {
			t.Fatal(err)
		}
		// The fresh member serves the data written before and while it
		// was out (a serializable read: its own copy).
		one, err := c.Client(i)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := one.Get(ctx, "k", clientv3.WithSerializable())
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" {
			t.Fatalf("change %d: fresh %s reads %v, %v; want v1", n, c.Members[i].Name, resp, err)
		}
	}
	// Degraded: a member down. The change is refused, nothing changed.
	if err := c.Kill(0); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveMember(ctx, 1); !errors.Is(err, integration.ErrDegraded) {
		t.Fatalf("remove with a member down: %v, want ErrDegraded", err)
	}
	if err := c.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitFullMembership(ctx); err != nil {
		t.Fatal(err)
	}
}

// A ZooKeeper server removed by reconfiguration (the leader, then a
// follower) and added back fresh, on an ensemble laid out WithReconfig: a
// session of every server keeps working meanwhile, the fresh server has the
// data, and a cut still takes effect on that layout.
func TestZooKeeperMemberChange(t *testing.T) {
	e := integration.NewZooKeeper(t, integration.WithReconfig())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if !e.CanChangeMembers() {
		t.Fatal("an ensemble started WithReconfig cannot change its membership")
	}
	conn, _, err := e.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create("/k", []byte("v0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	lead, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for n, i := range []int{lead, (lead + 1) % len(e.Servers)} {
		if err := e.RemoveMember(ctx, i); err != nil {
			t.Fatalf("remove %s: %v", e.Servers[i].Name, err)
		}
		if _, err := conn.Set("/k", []byte("v1"), -1); err != nil {
			t.Fatalf("set with %s removed: %v", e.Servers[i].Name, err)
		}
		if err := e.AddMember(ctx, i); err != nil {
			t.Fatalf("add %s: %v", e.Servers[i].Name, err)
		}
		if err := e.WaitFullMembership(ctx); err != nil {
			t.Fatal(err)
		}
		one, _, err := e.Connect(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := one.Sync("/k"); err != nil {
			t.Fatal(err)
		}
		b, _, err := one.Get("/k")
		if err != nil || string(b) != "v1" {
			t.Fatalf("change %d: fresh %s reads %q, %v; want v1", n, e.Servers[i].Name, b, err)
		}
	}
	// The peers' traffic still crosses the proxies: a cut follower
	// notices (Cut verifies it), and rejoins once healed.
	lead, err = e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := (lead + 1) % len(e.Servers)
	if err := e.Cut(f); err != nil {
		t.Fatalf("cut %s: %v", e.Servers[f].Name, err)
	}
	if err := e.RemoveMember(ctx, lead); !errors.Is(err, integration.ErrDegraded) {
		t.Fatalf("remove with a server cut off: %v, want ErrDegraded", err)
	}
	e.Heal(f)
	if err := e.WaitFullMembership(ctx); err != nil {
		t.Fatal(err)
	}
}
