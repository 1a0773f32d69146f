package etcdfence_test

import (
	"context"
	"errors"
	"log"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/etcdfence"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A holder of lock "ledger" appends to a ledger kept in etcd: the fence's
// check and the entry's put are one Txn, so a holder that lost the lock
// and woke up late cannot append after its successor did.
func Example() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	sess, err := etcdlock.NewSession(ctx, cli)
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)
	mu, err := etcdlock.NewMutex(sess, "ledger")
	if err != nil {
		log.Fatal(err)
	}
	fence, err := etcdfence.New(cli, "/fences/ledger", "ledger")
	if err != nil {
		log.Fatal(err)
	}
	err = distlock.Do(ctx, mu, func(ctx context.Context, tok distlock.Token) error {
		// ... long work, during which the lock may be lost ...
		_, err := fence.Write(ctx, tok, clientv3.OpPut("/ledger/entry", "paid"))
		return err
	})
	if errors.Is(err, fencing.ErrStale) {
		log.Print("a newer holder wrote first; nothing was written")
	} else if err != nil {
		log.Fatal(err)
	}
}

// WriteHeld also refuses a holder whose lock key is gone (its session
// expired, say) before any successor has written.
func ExampleFence_WriteHeld() {
	ctx := context.Background()
	var (
		cli   *clientv3.Client // connected
		fence *etcdfence.Fence // for lock "ledger"
		lease *distlock.Lease  // of an etcdlock.Mutex called "ledger"
	)
	key, err := etcdfence.HolderKey(ctx, cli, etcdlock.DefaultPrefix, lease.Token())
	if err == nil {
		_, err = fence.WriteHeld(ctx, lease.Token(), key, clientv3.OpPut("/ledger/entry", "paid"))
	}
	if errors.Is(err, etcdfence.ErrNotHeld) {
		log.Print("the lock is gone; nothing was written")
	}
}

// A holder of two locks at once ("accounts/alice" and "accounts/bob", one
// acquisition, one token per name) moves money between two accounts kept
// in etcd, each fenced by its own lock: one Txn checks both fences and
// applies both puts, and a stale token for either refuses all of it.
func ExampleWriteAll() {
	ctx := context.Background()
	var (
		cli    *clientv3.Client // connected
		tokens []distlock.Token // the multi-lock lease's tokens, one per name
	)
	alice, err := etcdfence.New(cli, "/fences/accounts/alice", "accounts/alice")
	if err != nil {
		log.Fatal(err)
	}
	bob, err := etcdfence.New(cli, "/fences/accounts/bob", "accounts/bob")
	if err != nil {
		log.Fatal(err)
	}
	_, err = etcdfence.WriteAll(ctx, tokens, []*etcdfence.Fence{alice, bob},
		clientv3.OpPut("/accounts/alice", "70"), clientv3.OpPut("/accounts/bob", "30"))
	var stale *fencing.StaleError
	if errors.As(err, &stale) {
		log.Printf("%s has a newer holder; nothing was written", stale.Resource)
	}
}
