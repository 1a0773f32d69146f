package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

// These examples run against a real ZooKeeper: exampleServers (in
// example_server_test.go) returns the address of a server started for
// them. In your code, give your ensemble's addresses.

// Every write to the protected resource goes through a fence with the
// holder's fencing token (its znode's czxid). A holder that paused while
// it held the lock (GC, swap, a stopped VM) and writes after its successor
// did is refused.
func ExampleMutex() {
	ctx := context.Background()
	conn, _, err := zk.Connect(exampleServers(), 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	sess, err := zklock.NewSession(ctx, conn)
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)
	mu, err := zklock.NewMutex(sess, "reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	// The resource's side; fencing also has fences in SQL, etcd, ZooKeeper
	// and HTTP.
	fence, err := fencing.NewMemory("reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	write := func(who string, t distlock.Token) error {
		return fence.Do(ctx, t, func(ctx context.Context) error {
			fmt.Println(who, "writes the report")
			return nil
		})
	}

	first, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := write("first holder", first.Token()); err != nil {
		log.Fatal(err)
	}
	first.Unlock(ctx) // or: it paused past its session timeout and lost the lock

	second, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := write("second holder", second.Token()); err != nil {
		log.Fatal(err)
	}
	defer second.Unlock(ctx)

	err = write("first holder, late,", first.Token())
	fmt.Println("late write refused:", errors.Is(err, fencing.ErrStale))
	// Output:
	// first holder writes the report
	// second holder writes the report
	// late write refused: true
}

// A Semaphore lets up to N holders in at once.
func ExampleSemaphore() {
	ctx := context.Background()
	conn, _, err := zk.Connect(exampleServers(), 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	sess, err := zklock.NewSession(ctx, conn)
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)
	exports, err := zklock.NewSemaphore(sess, "exports", 2) // two at a time
	if err != nil {
		log.Fatal(err)
	}

	p1, err := exports.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	p2, err := exports.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer p2.Release(ctx)
	_, err = exports.TryAcquire(ctx)
	fmt.Println("a third export must wait:", errors.Is(err, distlock.ErrLocked))

	p1.Release(ctx)
	p3, err := exports.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer p3.Release(ctx)
	// A permit is fenced by its slot: p3 took p1's, with a newer token.
	fmt.Println("the third export runs in the freed slot:", p3.Slot() == p1.Slot(), p3.Token().Newer(p1.Token()))
	// Output:
	// a third export must wait: true
	// the third export runs in the freed slot: true true
}

// A MultiMutex holds several locks as one acquisition. Two transfers that
// name the same two ledgers in opposite orders cannot deadlock, and each
// write is fenced with the token of every ledger it touches.
func ExampleMultiMutex() {
	ctx := context.Background()
	conn, _, err := zk.Connect(exampleServers(), 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	sess, err := zklock.NewSession(ctx, conn)
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)
	eur, _ := fencing.NewMemory("ledger/eur")
	usd, _ := fencing.NewMemory("ledger/usd")
	fences := []*fencing.Memory{eur, usd}

	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		transfers int
	)
	for _, names := range [][]string{{"ledger/eur", "ledger/usd"}, {"ledger/usd", "ledger/eur"}} {
		mm, err := zklock.NewMultiMutex(sess, names...)
		if err != nil {
			log.Fatal(err)
		}
		wg.Go(func() {
			for range 5 {
				lease, err := mm.Lock(ctx)
				if err != nil {
					log.Fatal(err)
				}
				err = fencing.DoAll(ctx, lease.Tokens(), fences, func(ctx context.Context) error {
					mu.Lock()
					transfers++
					mu.Unlock()
					return nil
				})
				if err != nil {
					log.Fatal(err)
				}
				lease.Unlock(ctx)
			}
		})
	}
	wg.Wait()
	fmt.Println("transfers:", transfers)
	fmt.Println("last transfer fenced both ledgers with one sequence number:", eur.Newest().Seq == usd.Newest().Seq)
	// Output:
	// transfers: 10
	// last transfer fenced both ledgers with one sequence number: true
}
