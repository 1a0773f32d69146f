package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"testing"
	"time"

	"github.com/distlock/distlock/diagnose"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration/embedded"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// An example program, or a test, that needs an etcd and has none: it
// starts one in the process, and a client of it, as of any cluster.
func ExampleStartEtcd() {
	ctx := context.Background()
	etcd, err := embedded.StartEtcd(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer etcd.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints()})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	sess, err := etcdlock.NewSession(ctx, cli)
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)
	mu, err := recipe.NewMutex(sess, "reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)
	fmt.Println("holding", lease.Token().Name)
	// Output: holding reports/daily
}

// TestNewEtcd: the member serves a client, and Close may be called again
// (NewEtcd's cleanup calls it once more when the test ends).
func TestNewEtcd(t *testing.T) {
	etcd := embedded.NewEtcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("get k: %v", resp.Kvs)
	}
	if err := etcd.Close(); err != nil {
		t.Fatal(err)
	}
	if err := etcd.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Trying zklock without a ZooKeeper of your own: one server, a process of
// its own, for as long as the program runs.
func ExampleStartZooKeeper() {
	ctx := context.Background()
	srv, err := embedded.StartZooKeeper(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	conn, _, err := zk.Connect(srv.Servers(), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	sess, err := zklock.NewSession(ctx, conn)
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)
	mu, err := recipe.NewMutex(sess, "reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)
	fmt.Println("holding", lease.Token().Name)
	// Output: holding reports/daily
}

// TestWithAddr: both servers serve on the address given, and a taken
// address is an error.
func TestWithAddr(t *testing.T) {
	addr := freeLoopback(t)
	etcd := embedded.NewEtcd(t, embedded.WithAddr(addr))
	if got := etcd.Endpoints(); len(got) != 1 || got[0] != "http://"+addr {
		t.Errorf("etcd endpoints %v, want http://%s", got, addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := embedded.StartEtcd(ctx, embedded.WithAddr(addr)); err == nil {
		t.Errorf("a second etcd on %s started", addr)
	}
	zaddr := freeLoopback(t)
	z := embedded.NewZooKeeper(t, embedded.WithAddr(zaddr))
	if got := z.Servers(); len(got) != 1 || got[0] != zaddr {
		t.Errorf("ZooKeeper servers %v, want %s", got, zaddr)
	}
	if err := diagnose.ZooKeeper(ctx, z.Servers()); err != nil {
		t.Error(err)
	}
	if _, err := embedded.StartZooKeeper(ctx, embedded.WithAddr(zaddr)); err == nil {
		t.Errorf("a second ZooKeeper on %s started", zaddr)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := diagnose.ZooKeeper(ctx, z.Servers()); !errors.Is(err, diagnose.ErrRefused) {
		t.Errorf("after Close: %v, want refused", err)
	}
}

func freeLoopback(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
