package zklock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

// These examples connect to ZooKeeper on localhost:2181; in this
// package's tests, TestMain (example_server_test.go) serves that address
// with a real ZooKeeper server. They share it, so each uses lock names of
// its own.

// A Session follows the ZooKeeper session of a connection: every lock,
// election and semaphore made on it is an ephemeral znode, held for as
// long as the session lives and gone at once when it is closed or its
// process dies (after the session timeout given to zk.Connect).
func ExampleNewSession() {
	ctx := context.Background()
	conn, _, err := zk.Connect([]string{"localhost:2181"}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	sess, err := zklock.NewSession(ctx, conn,
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
