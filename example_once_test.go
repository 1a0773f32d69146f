package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/schedule"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// These examples connect to etcd on localhost:2379 (zklock's types work
// the same way); in this package's tests, TestMain
// (example_server_test.go) serves that address with a real etcd member.

// Every replica of a service runs the daily report at 06:00; the first to
// take the lock runs it, the others find the day's slot done.
func ExampleOnce() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	sess, err := etcdlock.NewSession(ctx, cli, recipe.WithHolder("report-worker-3"))
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
	// In production: schedule.Daily(loc).Slot(time.Now()).
	slot := schedule.Daily(time.UTC).Slot(time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC))

	for range 2 { // this replica, then another one, later
		_, err := distlock.Once(ctx, mu, marks, slot, func(ctx context.Context) error {
			fmt.Println("sending the report of", slot) // ctx ends if the lock is lost
			return nil
		})
		var done *distlock.SlotDoneError
		var oe *distlock.OnceError
		switch {
		case errors.As(err, &done):
			fmt.Println(slot, "already sent by", done.Marker.Holder)
		case errors.As(err, &oe) && oe.Ran:
			log.Printf("report %s sent, but not marked: it may be sent again: %v", slot, err)
		case err != nil:
			log.Fatal(err)
		}
	}
	// Output:
	// sending the report of 2026-12-04
	// 2026-12-04 already sent by report-worker-3
}
