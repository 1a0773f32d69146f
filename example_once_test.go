package distlock_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/schedule"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Every replica of a service runs the daily report at 06:00 Berlin time;
// the first to take the lock runs it, the others find the day's slot done.
// (No output: it needs an etcd server.)
func ExampleOnce() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	sess, err := etcdlock.NewSession(ctx, cli, etcdlock.WithHolder("report-worker-3"))
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)
	mu, err := etcdlock.NewMutex(sess, "reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	marks, err := etcdlock.NewMarks(sess, "reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		log.Fatal(err)
	}
	slot := schedule.Daily(berlin).Slot(time.Now())

	ran, err := distlock.Once(ctx, mu, marks, slot, func(ctx context.Context) error {
		// ... build and send the report; ctx ends if the lock is lost ...
		return nil
	})
	var done *distlock.SlotDoneError
	var oe *distlock.OnceError
	switch {
	case errors.As(err, &done):
		log.Printf("report %s already sent by %s", slot, done.Marker.Holder)
	case errors.As(err, &oe) && oe.Ran:
		log.Printf("report %s sent, but not marked: it may be sent again: %v", slot, err)
	case err != nil:
		log.Printf("report %s: ran %v: %v", slot, ran, err)
	}
}
