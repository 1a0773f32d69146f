package gocronlock_test

import (
	"context"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/gocronlock"
	"github.com/go-co-op/gocron/v2"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Every instance of a service runs this: the report runs once a minute
// across all of them. If the instance running it is killed mid-run,
// another instance runs that minute's report again about 5 s later (the
// session's TTL), and the next minute's report runs on time.
func ExampleLocker() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	// The TTL must be below the period (NewLocker checks): a killed
	// runner's slot is rerun once its lease is gone, before the slot ends.
	s, err := etcdlock.NewSession(ctx, cli, etcdlock.WithTTL(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(context.Background())
	locker, err := gocronlock.NewLocker(gocronlock.Etcd(s), time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	sched, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
	if err != nil {
		log.Fatal(err)
	}
	// Fixed wall-clock times (a cron job), the same on every instance.
	if _, err := sched.NewJob(gocron.CronJob("* * * * *", false),
		gocron.NewTask(func() { log.Print("sending the report") }),
		gocron.WithName("report")); err != nil {
		log.Fatal(err)
	}
	sched.Start()
	<-ctx.Done()
	if err := sched.Shutdown(); err != nil {
		log.Print(err)
	}
}
