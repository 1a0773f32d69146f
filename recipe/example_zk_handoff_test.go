package recipe_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

// An Election's leader hands over to a chosen candidate in one multi: in
// a rolling deploy, to an instance already on the new version. The
// election never goes without a leader, the other candidates keep
// waiting, and the new term's token (the zxid of the handover) is larger.
func ExampleElection_handOffOnZooKeeper() {
	ctx := context.Background()
	// instance campaigns on a connection of its own: one ZooKeeper
	// session per process.
	var conns []*zk.Conn
	defer func() {
		for _, c := range conns {
			c.Close() // ends the Campaign still waiting, too
		}
	}()
	instance := func(value string) <-chan distlock.Leadership {
		conn, _, err := zk.Connect([]string{"localhost:2181"}, 10*time.Second, zk.WithLogInfo(false))
		if err != nil {
			log.Fatal(err)
		}
		conns = append(conns, conn)
		sess, err := zklock.NewSession(ctx, conn)
		if err != nil {
			log.Fatal(err)
		}
		el, err := recipe.NewElection(sess, "scheduler")
		if err != nil {
			log.Fatal(err)
		}
		ch := make(chan distlock.Leadership, 1)
		go func() {
			l, err := el.Campaign(ctx, value)
			if err != nil {
				return // its connection was closed while it waited
			}
			ch <- l
		}()
		return ch
	}

	old := <-instance("v1-host1")
	instance("v1-host2") // waits, and keeps waiting
	v2 := instance("v2-host1")

	// Wait until the new version's instance is in the election (the
	// queue's watch says so), then hand over to it.
	conn, _, err := zk.Connect([]string{"localhost:2181"}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	admin, err := zklock.NewAdmin(conn, zklock.DefaultPrefix)
	if err != nil {
		log.Fatal(err)
	}
	errJoined := errors.New("v2-host1 joined")
	err = admin.WatchQueue(ctx, "scheduler", func(q []distlock.QueueEntry) error {
		for _, e := range q {
			if e.Holder == "v2-host1" {
				return errJoined
			}
		}
		return nil
	})
	if !errors.Is(err, errJoined) {
		log.Fatal(err)
	}
	next, err := old.HandOff(ctx, "v2-host1") // ErrNoCandidate if it had left: old.Err() == nil says still leading
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("handed over to", next.Value)
	lead := <-v2
	fmt.Println("old term ended:", errors.Is(old.Err(), distlock.ErrReleased))
	fmt.Println("new token is larger:", lead.Token().Newer(old.Token()))
	// Output:
	// handed over to v2-host1
	// old term ended: true
	// new token is larger: true
}

// A candidate of a higher priority asks a leader of a lower one to step
// down: a leader on a revocable session sees its Done close with a
// *distlock.RevokedError, finishes its step and resigns, which hands over
// to the highest priority waiting. (A leader that does not step down is
// deleted after the preempt grace.)
func ExampleElection_priorityOnZooKeeper() {
	ctx := context.Background()
	var conns []*zk.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// election joins on a connection of its own: one ZooKeeper session
	// per process.
	election := func(opts ...recipe.Option) *recipe.Election {
		conn, _, err := zk.Connect([]string{"localhost:2181"}, 10*time.Second, zk.WithLogInfo(false))
		if err != nil {
			log.Fatal(err)
		}
		conns = append(conns, conn)
		sess, err := zklock.NewSession(ctx, conn, opts...)
		if err != nil {
			log.Fatal(err)
		}
		el, err := recipe.NewElection(sess, "primary", distlock.WithPreemptGrace(time.Minute))
		if err != nil {
			log.Fatal(err)
		}
		return el
	}

	standby, err := election(recipe.WithRevocable()).Campaign(ctx, "standby-host")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader: standby-host")
	preferred := make(chan distlock.Leadership, 1)
	go func() {
		l, err := election().Campaign(ctx, "preferred-host", distlock.WithPriority(10))
		if err != nil {
			log.Fatal(err)
		}
		preferred <- l
	}()

	<-standby.Done()
	var asked *distlock.RevokedError
	fmt.Println("asked to step down:", errors.As(standby.Err(), &asked))
	// ... finish the current step: its fenced writes still go through ...
	if err := standby.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	lead := <-preferred
	fmt.Println("leader: preferred-host, token larger:", lead.Token().Newer(standby.Token()))
	// Output:
	// leader: standby-host
	// asked to step down: true
	// leader: preferred-host, token larger: true
}
