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
