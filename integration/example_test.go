package integration_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
)

// TestExampleLostLock is the README's example of a user's own integration
// test: a worker holding a lock through member 0 must stop when member 0 is
// cut off from the cluster.
func TestExampleLostLock(t *testing.T) {
	cluster := integration.NewEtcd(t) // 3 real etcd processes, removed when the test ends
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cli, err := cluster.Client(0) // a client of member 0 only
	if err != nil {
		t.Fatal(err)
	}
	sess, err := etcdlock.NewSession(ctx, cli, etcdlock.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx)
	mu, err := recipe.NewMutex(sess, "jobs/report")
	if err != nil {
		t.Fatal(err)
	}

	err = distlock.Do(ctx, mu, func(ctx context.Context, tok distlock.Token) error {
		// Partition member 0 from clients and peers; Cut returns once the
		// member has noticed (it reports no leader).
		defer cluster.Heal(0)
		if err := cluster.Cut(0); err != nil {
			return err
		}
		<-ctx.Done() // the work's context ends when the lock is lost
		return context.Cause(ctx)
	})
	if !errors.Is(err, distlock.ErrLost) || !errors.Is(err, distlock.ErrSessionExpired) {
		t.Fatalf("Do: %v, want the lock lost with the session", err)
	}
}
