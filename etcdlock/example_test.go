package etcdlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/recipe"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// These examples connect to etcd on localhost:2379; in this package's
// tests, TestMain (example_server_test.go) serves that address with a real
// etcd member. They share it, so each uses lock names of its own.

// A Session is one lease in etcd, kept alive in the background: every
// lock, election and semaphore made on it is held for as long as it
// lives, and released at once when it is closed or its process dies
// (after the lease's TTL).
func ExampleNewSession() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	sess, err := etcdlock.NewSession(ctx, cli,
		etcdlock.WithTTL(15*time.Second),        // how long a dead holder keeps its locks
		recipe.WithHolder("billing-7 pid 4242"), // shown by Inspect and `distlock status`
	)
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)
	mu, err := recipe.NewMutex(sess, "billing/invoices")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)
	fmt.Println("holding", lease.Token().Name)
	// Output:
	// holding billing/invoices
}
