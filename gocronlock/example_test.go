package gocronlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/gocronlock"
	"github.com/go-co-op/gocron/v2"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Every instance of a service runs the same scheduler: each slot's job
// runs once across all of them. If the instance running a slot is killed
// mid-run, another instance runs that slot again once the dead session's
// lease is gone (the TTL, here 10 s), and the next slot runs on time.
func ExampleLocker() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	// The TTL must be shorter than the period (NewLocker checks it).
	sess, err := etcdlock.NewSession(ctx, cli, etcdlock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)
	locker, err := gocronlock.NewLocker(gocronlock.Etcd(sess), time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	sched, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
	if err != nil {
		log.Fatal(err)
	}
	ran := make(chan struct{}, 1)
	// Slots are the period's multiples of wall-clock time, the same on
	// every instance: a run belongs to the slot nearest its start.
	if _, err := sched.NewJob(gocron.DurationJob(time.Minute),
		gocron.NewTask(func() {
			select {
			case ran <- struct{}{}:
			default:
			}
		}),
		gocron.WithName("report"),
		gocron.WithStartAt(gocron.WithStartImmediately())); err != nil {
		log.Fatal(err)
	}
	sched.Start()
	defer sched.Shutdown()
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		log.Fatal("the job did not run within 30 s")
	}
	fmt.Println("the report ran once for its slot; job lock", locker.LockName("report"))
	// Output: the report ran once for its slot; job lock gocron/report
}
