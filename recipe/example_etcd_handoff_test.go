package recipe_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/recipe"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// HandOff passes leadership to a chosen candidate in one write. In a
// rolling deploy the leader on the old version waits for an instance of
// the new version to be in the election, then hands over to it: the
// election never goes without a leader, and the other candidates keep
// waiting.
func ExampleElection_handOff() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	var sessions []*etcdlock.Session
	defer func() {
		for _, s := range sessions {
			s.Close(ctx) // ends the Campaign still waiting, too
		}
	}()
	// campaign runs one instance's Campaign in the background.
	campaign := func(value string) <-chan distlock.Leadership {
		sess, err := etcdlock.NewSession(ctx, cli)
		if err != nil {
			log.Fatal(err)
		}
		sessions = append(sessions, sess)
		el, err := recipe.NewElection(sess, "scheduler")
		if err != nil {
			log.Fatal(err)
		}
		ch := make(chan distlock.Leadership, 1)
		go func() {
			l, err := el.Campaign(ctx, value)
			if err != nil {
				return // its session was closed while it waited
			}
			ch <- l
		}()
		return ch
	}

	old := <-campaign("v1-host1")
	campaign("v1-host2") // waits, and keeps waiting
	v2 := campaign("v2-host1")

	// Wait until the new version's instance is in the election (the
	// queue's watch says so), then hand over to it.
	admin, err := etcdlock.NewAdmin(cli, etcdlock.DefaultPrefix)
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
func ExampleElection_priority() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	var sessions []*etcdlock.Session
	defer func() {
		for _, s := range sessions {
			s.Close(ctx)
		}
	}()
	election := func(opts ...recipe.Option) *recipe.Election {
		sess, err := etcdlock.NewSession(ctx, cli, opts...)
		if err != nil {
			log.Fatal(err)
		}
		sessions = append(sessions, sess)
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
