package zkfence_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/zkfence"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

// A holder of lock "ledger" appends to a ledger kept in ZooKeeper: the
// fence's check and the entry's creation are one multi, so a holder that
// lost the lock and woke up late cannot append after its successor did.
func Example() {
	ctx := context.Background()
	conn, _, err := zk.Connect([]string{"localhost:2181"}, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	sess, err := zklock.NewSession(ctx, conn)
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)
	mu, err := zklock.NewMutex(sess, "ledger")
	if err != nil {
		log.Fatal(err)
	}
	fence, err := zkfence.New(conn, "/fences/ledger", "ledger")
	if err != nil {
		log.Fatal(err)
	}
	err = distlock.Do(ctx, mu, func(ctx context.Context, tok distlock.Token) error {
		// ... long work, during which the lock may be lost ...
		_, err := fence.Write(ctx, tok, &zk.CreateRequest{
			Path: "/ledger/e-", Data: []byte("paid"), Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagSequence})
		return err
	})
	if errors.Is(err, fencing.ErrStale) {
		log.Print("a newer holder wrote first; nothing was written")
	} else if err != nil {
		log.Fatal(err)
	}
}

// A holder of two locks at once ("accounts/alice" and "accounts/bob", one
// acquisition, one token per name) moves money between two accounts kept
// in ZooKeeper, each fenced by its own lock: one multi checks both fences
// and sets both accounts, and a stale token for either refuses all of it.
func ExampleWriteAll() {
	ctx := context.Background()
	var (
		conn   *zk.Conn         // connected
		tokens []distlock.Token // the multi-lock lease's tokens, one per name
	)
	alice, err := zkfence.New(conn, "/fences/accounts/alice", "accounts/alice")
	if err != nil {
		log.Fatal(err)
	}
	bob, err := zkfence.New(conn, "/fences/accounts/bob", "accounts/bob")
	if err != nil {
		log.Fatal(err)
	}
	_, err = zkfence.WriteAll(ctx, tokens, []*zkfence.Fence{alice, bob},
		&zk.SetDataRequest{Path: "/accounts/alice", Data: []byte("70"), Version: -1},
		&zk.SetDataRequest{Path: "/accounts/bob", Data: []byte("30"), Version: -1})
	var stale *fencing.StaleError
	if errors.As(err, &stale) {
		log.Printf("%s has a newer holder; nothing was written", stale.Resource)
	}
}
