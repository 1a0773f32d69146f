package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/recipe"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Do runs a function under a lock and always releases it; the function
// gets the fencing token to send with its writes.
func ExampleDo() {
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
	mu, err := recipe.NewMutex(sess, "invoices/run")
	if err != nil {
		log.Fatal(err)
	}
	store, err := fencing.NewMemory("invoices/run") // the protected resource's fence
	if err != nil {
		log.Fatal(err)
	}

	err = distlock.Do(ctx, mu, func(ctx context.Context, t distlock.Token) error {
		return store.Do(ctx, t, func(ctx context.Context) error {
			fmt.Println("invoices written under", t.Name)
			return nil
		})
	})
	if errors.Is(err, distlock.ErrLost) {
		log.Print("the lock was lost while the run went on: check the fenced store")
	} else if err != nil {
		log.Fatal(err)
	}
	// Output:
	// invoices written under invoices/run
}

// RunAsLeader runs a singleton worker: every replica calls it, one leads
// at a time, and a leader that stops hands over to the next.
func ExampleRunAsLeader() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	sess, err := etcdlock.NewSession(ctx, cli)
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(context.Background())
	el, err := recipe.NewElection(sess, "compactor")
	if err != nil {
		log.Fatal(err)
	}

	err = distlock.RunAsLeader(ctx, el, "replica-1", func(ctx context.Context, t distlock.Token) error {
		fmt.Println("replica-1 leads the compactor")
		// ... work until ctx ends, sending t with every write ...
		cancel() // here: stop after one term
		return nil
	})
	fmt.Println("stopped:", errors.Is(err, context.Canceled))
	// Output:
	// replica-1 leads the compactor
	// stopped: true
}

// A token travels as text (an HTTP header, a column); ParseToken reads it
// back, and tokens of one lock compare by their sequence numbers.
func ExampleParseToken() {
	older, err := distlock.ParseToken("reports/daily@1017.694d7f0c8a1b2b07")
	if err != nil {
		log.Fatal(err)
	}
	newer, err := distlock.ParseToken("reports/daily@1042.694d7f0c8a1b2c3d")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(newer.Name, newer.Seq, newer.Newer(older))

	_, err = distlock.ParseToken("reports/daily@1042") // names no owner
	fmt.Println(errors.Is(err, distlock.ErrInvalidToken))
	// Output:
	// reports/daily 1042 true
	// true
}
