package etcdfence_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/etcdfence"
	"github.com/distlock/distlock/recipe"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// These examples connect to etcd on localhost:2379; in this package's
// tests, TestMain (example_server_test.go) serves that address with a real
// etcd member.

// Holders of lock "ledger" append to a ledger kept in etcd: the fence's
// check and the entry's put are one Txn, so a holder that lost the lock
// and woke up late cannot write after its successor did.
func Example() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	sess, err := etcdlock.NewSession(ctx, cli)
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)
	mu, err := recipe.NewMutex(sess, "ledger")
	if err != nil {
		log.Fatal(err)
	}
	fence, err := etcdfence.New(cli, "/fences/ledger", "ledger")
	if err != nil {
		log.Fatal(err)
	}

	first, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	first.Unlock(ctx) // or: it paused past its session's TTL and lost the lock
	second, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer second.Unlock(ctx)
	if _, err := fence.Write(ctx, second.Token(), clientv3.OpPut("/ledger/balance", "105")); err != nil {
		log.Fatal(err)
	}

	_, err = fence.Write(ctx, first.Token(), clientv3.OpPut("/ledger/balance", "100"))
	fmt.Println("late write refused:", errors.Is(err, fencing.ErrStale))
	resp, err := cli.Get(ctx, "/ledger/balance")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("balance: %s\n", resp.Kvs[0].Value)
	// Output:
	// late write refused: true
	// balance: 105
}

// WriteHeld also refuses a holder whose lock entry is gone (its session
// ended, say) before any successor has written.
func ExampleFence_WriteHeld() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	sess, err := etcdlock.NewSession(ctx, cli)
	if err != nil {
		log.Fatal(err)
	}
	mu, err := recipe.NewMutex(sess, "ledger/held")
	if err != nil {
		log.Fatal(err)
	}
	fence, err := etcdfence.New(cli, "/fences/ledger/held", "ledger/held")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	key, err := etcdfence.HolderKey(ctx, cli, etcdlock.DefaultPrefix, lease.Token())
	if err != nil {
		log.Fatal(err)
	}
	_, err = fence.WriteHeld(ctx, lease.Token(), key, clientv3.OpPut("/ledger/held/entry", "paid"))
	fmt.Println("while held:", err)

	sess.Close(ctx) // the session ends: its lock entry is deleted
	_, err = fence.WriteHeld(ctx, lease.Token(), key, clientv3.OpPut("/ledger/held/entry", "paid twice"))
	fmt.Println("once gone:", errors.Is(err, etcdfence.ErrNotHeld))
	// Output:
	// while held: <nil>
	// once gone: true
}

// A holder of two locks at once (an recipe.MultiMutex: one acquisition,
// one token per name) moves money between two accounts kept in etcd, each
// fenced by its own lock: one Txn checks both fences and applies both
// puts, and a stale token for either refuses all of it.
func ExampleWriteAll() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	sess, err := etcdlock.NewSession(ctx, cli)
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)
	alice, _ := etcdfence.New(cli, "/fences/accounts/alice", "accounts/alice")
	bob, _ := etcdfence.New(cli, "/fences/accounts/bob", "accounts/bob")
	both, _ := recipe.NewMultiMutex(sess, "accounts/alice", "accounts/bob")
	bobOnly, _ := recipe.NewMutex(sess, "accounts/bob")

	old, err := both.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	_, err = etcdfence.WriteAll(ctx, old.Tokens(), []*etcdfence.Fence{alice, bob},
		clientv3.OpPut("/accounts/alice", "70"), clientv3.OpPut("/accounts/bob", "30"))
	fmt.Println("transfer:", err)
	old.Unlock(ctx) // or: it paused and lost its locks

	newer, err := bobOnly.Lock(ctx) // a newer holder of bob's lock alone writes
	if err != nil {
		log.Fatal(err)
	}
	defer newer.Unlock(ctx)
	if _, err := bob.Write(ctx, newer.Token(), clientv3.OpPut("/accounts/bob", "0")); err != nil {
		log.Fatal(err)
	}

	_, err = etcdfence.WriteAll(ctx, old.Tokens(), []*etcdfence.Fence{alice, bob},
		clientv3.OpPut("/accounts/alice", "40"), clientv3.OpPut("/accounts/bob", "60"))
	var stale *fencing.StaleError
	fmt.Println("retry refused whole:", errors.As(err, &stale), stale.Resource)
	// Output:
	// transfer: <nil>
	// retry refused whole: true etcd fence "/fences/accounts/bob"
}
