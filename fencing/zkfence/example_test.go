package zkfence_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/zkfence"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

// These examples connect to ZooKeeper on localhost:2181; in this
// package's tests, TestMain (example_server_test.go) serves that address
// with a real ZooKeeper server.

// Holders of lock "ledger" keep a balance in ZooKeeper: the fence's check
// and the balance's update are one multi, so a holder that lost the lock
// and woke up late cannot write after its successor did.
func Example() {
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
	mu, err := recipe.NewMutex(sess, "ledger")
	if err != nil {
		log.Fatal(err)
	}
	fence, err := zkfence.New(conn, "/fences/ledger", "ledger")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := conn.Create("/balance", []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		log.Fatal(err)
	}

	first, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	first.Unlock(ctx) // or: it paused past its session timeout and lost the lock
	second, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer second.Unlock(ctx)
	if _, err := fence.Write(ctx, second.Token(), &zk.SetDataRequest{Path: "/balance", Data: []byte("105"), Version: -1}); err != nil {
		log.Fatal(err)
	}

	_, err = fence.Write(ctx, first.Token(), &zk.SetDataRequest{Path: "/balance", Data: []byte("100"), Version: -1})
	fmt.Println("late write refused:", errors.Is(err, fencing.ErrStale))
	balance, _, err := conn.Get("/balance")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("balance: %s\n", balance)
	// Output:
	// late write refused: true
	// balance: 105
}

// A holder of two locks at once (a recipe.MultiMutex: one acquisition, one
// token per name) moves money between two accounts kept in ZooKeeper, each
// fenced by its own lock: one multi checks both fences and sets both
// accounts, and a stale token for either refuses all of it.
func ExampleWriteAll() {
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
	for _, p := range []string{"/accounts", "/accounts/alice", "/accounts/bob"} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			log.Fatal(err)
		}
	}
	alice, _ := zkfence.New(conn, "/fences/accounts/alice", "accounts/alice")
	bob, _ := zkfence.New(conn, "/fences/accounts/bob", "accounts/bob")
	both, _ := recipe.NewMultiMutex(sess, "accounts/alice", "accounts/bob")
	bobOnly, _ := recipe.NewMutex(sess, "accounts/bob")
	set := func(path, v string) *zk.SetDataRequest {
		return &zk.SetDataRequest{Path: path, Data: []byte(v), Version: -1}
	}

	old, err := both.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	_, err = zkfence.WriteAll(ctx, old.Tokens(), []*zkfence.Fence{alice, bob},
		set("/accounts/alice", "70"), set("/accounts/bob", "30"))
	fmt.Println("transfer:", err)
	old.Unlock(ctx) // or: it paused and lost its locks

	newer, err := bobOnly.Lock(ctx) // a newer holder of bob's lock alone writes
	if err != nil {
		log.Fatal(err)
	}
	defer newer.Unlock(ctx)
	if _, err := bob.Write(ctx, newer.Token(), set("/accounts/bob", "0")); err != nil {
		log.Fatal(err)
	}

	_, err = zkfence.WriteAll(ctx, old.Tokens(), []*zkfence.Fence{alice, bob},
		set("/accounts/alice", "40"), set("/accounts/bob", "60"))
	var stale *fencing.StaleError
	fmt.Println("retry refused whole:", errors.As(err, &stale), stale.Resource)
	// Output:
	// transfer: <nil>
	// retry refused whole: true zookeeper fence "/fences/accounts/bob"
}
