package embedded_test

import (
	"context"
	"fmt"
	"log"
	"testing"
	"time"

	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration/embedded"
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
	mu, err := etcdlock.NewMutex(sess, "reports/daily")
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
