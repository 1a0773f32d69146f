package recipe_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/schedule"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

// These examples connect to ZooKeeper on localhost:2181; in this
// package's tests, TestMain (example_server_test.go) serves that address
// with a real ZooKeeper server. They share it, so each uses lock names of
// its own.

// Every write to the protected resource goes through a fence with the
// holder's fencing token. A holder that paused while it held the lock
// (GC, swap, a stopped VM) and writes after its successor did is refused.
func ExampleMutex_zooKeeper() {
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
	mu, err := recipe.NewMutex(sess, "reports/daily")
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

// TryLock takes the lock only if nobody holds it or waits, and leaves
// nothing behind when it loses.
func ExampleMutex_TryLock_zooKeeper() {
	ctx := context.Background()
	// Two workers, each with its ZooKeeper session (its connection).
	connA, _, err := zk.Connect([]string{"localhost:2181"}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		log.Fatal(err)
	}
	defer connA.Close()
	connB, _, err := zk.Connect([]string{"localhost:2181"}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		log.Fatal(err)
	}
	defer connB.Close()
	a, err := zklock.NewSession(ctx, connA)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := zklock.NewSession(ctx, connB)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close(ctx)
	muA, _ := recipe.NewMutex(a, "jobs/cleanup")
	muB, _ := recipe.NewMutex(b, "jobs/cleanup")

	held, err := muA.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	_, err = muB.TryLock(ctx)
	fmt.Println("b: held by another owner:", errors.Is(err, distlock.ErrLocked))

	held.Unlock(ctx)
	lease, err := muB.TryLock(ctx)
	fmt.Println("b: got it:", err == nil)
	if err == nil {
		lease.Unlock(ctx)
	}
	// Output:
	// b: held by another owner: true
	// b: got it: true
}

// Readers hold the lock together and keep writers out; a writer holds it
// alone.
func ExampleRWMutex_zooKeeper() {
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
	rw, err := recipe.NewRWMutex(sess, "config")
	if err != nil {
		log.Fatal(err)
	}

	r1, err := rw.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	r2, err := rw.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("two readers hold it")
	_, err = rw.TryLock(ctx)
	fmt.Println("a writer must wait:", errors.Is(err, distlock.ErrLocked))

	r1.Unlock(ctx)
	r2.Unlock(ctx)
	w, err := rw.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the writer holds it alone")
	w.Unlock(ctx)
	// Output:
	// two readers hold it
	// a writer must wait: true
	// the writer holds it alone
}

// Observe follows an election's leader: the current one first, then every
// change, "no leader" included.
func ExampleElection_Observe_zooKeeper() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
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
	el, err := recipe.NewElection(sess, "compactor")
	if err != nil {
		log.Fatal(err)
	}

	leaders := el.Observe(ctx) // closed when ctx ends
	fmt.Println("no leader:", (<-leaders).NoLeader())

	lead, err := el.Campaign(ctx, "worker-a") // returns once worker-a leads
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", (<-leaders).Value)
	if err := lead.Proclaim(ctx, "worker-a, compacting"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", (<-leaders).Value)
	if err := lead.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("no leader:", (<-leaders).NoLeader())
	// Output:
	// no leader: true
	// leader: worker-a
	// leader: worker-a, compacting
	// no leader: true
}

// distlock.RunAsLeader runs a singleton worker on an Election: each
// replica runs it, one works at a time, and when the leader's session
// ends (its process died) the next replica takes over.
func ExampleElection_runAsLeaderOnZooKeeper() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	leads := make(chan string)
	var wg sync.WaitGroup
	defer wg.Wait()                                // after cancel: every worker has stopped
	replica := func(name string) *zklock.Session { // one connection per process
		conn, _, err := zk.Connect([]string{"localhost:2181"}, 10*time.Second, zk.WithLogInfo(false))
		if err != nil {
			log.Fatal(err)
		}
		sess, err := zklock.NewSession(ctx, conn)
		if err != nil {
			log.Fatal(err)
		}
		el, err := recipe.NewElection(sess, "indexer")
		if err != nil {
			log.Fatal(err)
		}
		wg.Go(func() {
			defer conn.Close()
			defer sess.Close(context.Background())
			distlock.RunAsLeader(ctx, el, name, func(ctx context.Context, t distlock.Token) error {
				select {
				case leads <- name:
				case <-ctx.Done():
				}
				// ... compact, sending t with every write (see ExampleMutex) ...
				<-ctx.Done() // leadership lost, or the worker stops
				return nil
			})
		})
		return sess
	}

	a := replica("replica-a")
	fmt.Println(<-leads, "leads")
	replica("replica-b")
	a.Close(ctx) // replica-a stops: its lock nodes are deleted
	fmt.Println(<-leads, "takes over")
	cancel()
	// Output:
	// replica-a leads
	// replica-b takes over
}

// A Semaphore lets up to N holders in at once.
func ExampleSemaphore_zooKeeper() {
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
	exports, err := recipe.NewSemaphore(sess, "exports", 2) // two at a time
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

// distlock.Once runs a scheduled job at most once per slot (here, per
// day) across replicas, with the lock and the slot's done-marker kept by
// Marks.
func ExampleMarks_zooKeeper() {
	ctx := context.Background()
	conn, _, err := zk.Connect([]string{"localhost:2181"}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	sess, err := zklock.NewSession(ctx, conn, recipe.WithHolder("replica-a"))
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)
	mu, err := recipe.NewMutex(sess, "reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	marks, err := recipe.NewMarks(sess, "reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	slot := schedule.Daily(time.UTC).Slot(time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC))

	report := func(ctx context.Context) error {
		fmt.Println("sending the report of", slot)
		return nil
	}
	// The first run sends it; any later one, here or on another replica,
	// finds the slot done.
	for range 2 {
		_, err := distlock.Once(ctx, mu, marks, slot, report)
		var done *distlock.SlotDoneError
		if errors.As(err, &done) {
			fmt.Println(slot, "already sent by", done.Marker.Holder)
		} else if err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// sending the report of 2026-12-02
	// 2026-12-02 already sent by replica-a
}

// An operator asks a lock's holder to let go; a revocable holder (its
// session made WithRevocable) hears it on its Lease and releases. The
// distlock revoke command does the operator's part.
func ExampleAdmin_Revoke_zooKeeper() {
	ctx := context.Background()
	conn, _, err := zk.Connect([]string{"localhost:2181"}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	sess, err := zklock.NewSession(ctx, conn, recipe.WithRevocable())
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)
	mu, err := recipe.NewMutex(sess, "imports/nightly")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	go func() { // the holder
		<-lease.Done()
		var revoked *distlock.RevokedError
		if errors.As(lease.Err(), &revoked) {
			fmt.Println("holder asked to let go:", revoked.Reason)
		}
		lease.Unlock(ctx) // within the grace period
	}()

	admin, err := zklock.NewAdmin(conn, "") // the locks under DefaultPrefix
	if err != nil {
		log.Fatal(err)
	}
	revocations, err := admin.Revoke(ctx, "imports/nightly", distlock.RevokeRequest{
		Reason: "stuck on a dead NFS mount",
		Grace:  30 * time.Second,
		Force:  true, // delete the holder's entry if it has not released by then
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range revocations {
		fmt.Println("outcome:", r.Outcome)
	}
	// Output:
	// holder asked to let go: stuck on a dead NFS mount
	// outcome: released
}

// Inspect reads a lock's queue once: who holds it, and who waits, in
// order.
func ExampleAdmin_Inspect_zooKeeper() {
	ctx := context.Background()
	conn, _, err := zk.Connect([]string{"localhost:2181"}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	sess, err := zklock.NewSession(ctx, conn, recipe.WithHolder("exporter-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)
	rw, err := recipe.NewRWMutex(sess, "exports/catalog")
	if err != nil {
		log.Fatal(err)
	}
	r, err := rw.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Unlock(ctx)

	admin, err := zklock.NewAdmin(conn, zklock.DefaultPrefix)
	if err != nil {
		log.Fatal(err)
	}
	queue, err := admin.Inspect(ctx, "exports/catalog")
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range queue {
		fmt.Println(e.Holder, e.Kind, "holding:", e.Holding, "token matches:", e.Token == r.Token())
	}
	// Output:
	// exporter-1 shared holding: true token matches: true
}

// WatchQueue follows a lock's queue, as a dashboard would: who holds it,
// who waits.
func ExampleAdmin_WatchQueue_zooKeeper() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conn, _, err := zk.Connect([]string{"localhost:2181"}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	admin, err := zklock.NewAdmin(conn, "")
	if err != nil {
		log.Fatal(err)
	}
	queues := make(chan string)
	go admin.WatchQueue(ctx, "backups/db", func(q []distlock.QueueEntry) error {
		var s []string
		for _, e := range q {
			s = append(s, fmt.Sprintf("%s holding=%v", e.Holder, e.Holding))
		}
		select {
		case queues <- "[" + strings.Join(s, ", ") + "]":
		case <-ctx.Done():
		}
		return nil
	})
	fmt.Println(<-queues)

	// Two workers, each with its session, take the lock in turn.
	var mu [2]*recipe.Mutex
	for i, holder := range []string{"worker-a", "worker-b"} {
		conn, _, err := zk.Connect([]string{"localhost:2181"}, 10*time.Second, zk.WithLogInfo(false))
		if err != nil {
			log.Fatal(err)
		}
		defer conn.Close()
		sess, err := zklock.NewSession(ctx, conn, recipe.WithHolder(holder))
		if err != nil {
			log.Fatal(err)
		}
		defer sess.Close(ctx)
		mu[i], _ = recipe.NewMutex(sess, "backups/db")
	}
	a, err := mu[0].Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-queues)
	b := make(chan *distlock.Lease)
	go func() {
		l, err := mu[1].Lock(ctx) // waits for worker-a
		if err != nil {
			log.Fatal(err)
		}
		b <- l
	}()
	fmt.Println(<-queues)
	a.Unlock(ctx)
	fmt.Println(<-queues)
	(<-b).Unlock(ctx)
	fmt.Println(<-queues)
	// Output:
	// []
	// [worker-a holding=true]
	// [worker-a holding=true, worker-b holding=false]
	// [worker-b holding=true]
	// []
}

// A MultiMutex holds several locks as one acquisition. Two transfers that
// name the same two ledgers in opposite orders cannot deadlock, and each
// write is fenced with the token of every ledger it touches.
func ExampleMultiMutex_zooKeeper() {
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
	eur, _ := fencing.NewMemory("ledger/eur")
	usd, _ := fencing.NewMemory("ledger/usd")
	fences := []*fencing.Memory{eur, usd}

	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		transfers int
	)
	for _, names := range [][]string{{"ledger/eur", "ledger/usd"}, {"ledger/usd", "ledger/eur"}} {
		mm, err := recipe.NewMultiMutex(sess, names...)
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
