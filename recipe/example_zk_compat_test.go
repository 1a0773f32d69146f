package recipe_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

// A lock shared with another client, both ways: in CompatGoZookeeper the
// Mutex's entries are named as go-zookeeper's zk.Lock names its own, so a
// zk.Lock on the same path (/distlock/NAME) waits for distlock's holder,
// as distlock's waiters wait for a zk.Lock holder. CompatCurator and
// CompatKazoo do the same for Java and Python services.
func ExampleMutex_compatOnZooKeeper() {
	ctx := context.Background()
	conn, _, err := zk.Connect([]string{"localhost:2181"}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	sess, err := zklock.NewSession(ctx, conn)
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)
	mu, err := recipe.NewMutex(sess, "examples/shared", distlock.WithCompat(distlock.CompatGoZookeeper))
	if err != nil {
		log.Fatal(err)
	}
	lease, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}

	// Another program's zk.Lock on the same path, on a connection of its own.
	other, _, err := zk.Connect([]string{"localhost:2181"}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		log.Fatal(err)
	}
	defer other.Close()
	zl := zk.NewLock(other, zklock.DefaultPrefix+"/examples/shared", zk.WorldACL(zk.PermAll))
	got := make(chan error, 1)
	go func() { got <- zl.Lock() }()
	select {
	case err := <-got:
		log.Fatalf("zk.Lock returned while distlock holds: %v", err)
	case <-time.After(200 * time.Millisecond):
		fmt.Println("zk.Lock waits while distlock holds")
	}
	if err := lease.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	if err := <-got; err != nil {
		log.Fatal(err)
	}
	fmt.Println("zk.Lock holds after distlock's Unlock")
	if err := zl.Unlock(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// zk.Lock waits while distlock holds
	// zk.Lock holds after distlock's Unlock
}
