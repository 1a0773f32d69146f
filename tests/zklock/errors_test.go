package zklock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/locktest"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
)

// TestErrorTexts provokes an error of every LockError operation on a real
// 3-server ensemble and checks its text (see locktest.ErrorTexts), and
// that an error not about a lock says "zklock:" once.
func TestErrorTexts(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	locktest.ErrorTexts(t, newBackend(t, ens, admin), "zookeeper")

	_, err := recipe.NewMutex((*zklock.Session)(nil), "ledger")
	if !errors.Is(err, distlock.ErrNilClient) || !strings.HasPrefix(err.Error(), `zklock: new mutex "ledger": `) ||
		strings.Count(err.Error(), "zklock:") != 1 || strings.Contains(err.Error(), "distlock:") {
		t.Errorf("NewMutex(nil): %v", err)
	}
}
