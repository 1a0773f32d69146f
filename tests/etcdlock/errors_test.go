package etcdlock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration/locktest"
	"github.com/distlock/distlock/recipe"
)

// TestErrorTexts provokes an error of every LockError operation on a real
// 3-member etcd cluster and checks its text (see locktest.ErrorTexts),
// and that an error not about a lock says "etcdlock:" once.
func TestErrorTexts(t *testing.T) {
	locktest.ErrorTexts(t, &etcdBackend{clus: newCluster(t)}, "etcd")

	_, err := recipe.NewMutex((*etcdlock.Session)(nil), "ledger")
	if !errors.Is(err, distlock.ErrNilClient) || !strings.HasPrefix(err.Error(), `etcdlock: new mutex "ledger": `) ||
		strings.Count(err.Error(), "etcdlock:") != 1 || strings.Contains(err.Error(), "distlock:") {
		t.Errorf("NewMutex(nil): %v", err)
	}
}
