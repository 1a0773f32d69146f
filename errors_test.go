package distlock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/distlock/distlock"
)

// TestLockErrorText: a LockError names the library, the backend and the
// lock once each; a OnceError whose cause is a LockError of its lock
// names them once too.
func TestLockErrorText(t *testing.T) {
	hold := &distlock.LockError{Backend: "etcd", Name: "ledger", Op: distlock.OpHold, Err: distlock.ErrLost}
	lock := &distlock.LockError{Backend: "zookeeper", Name: "ledger", Op: distlock.OpLock, Err: context.Canceled}
	for _, c := range []struct {
		err  error
		want string
	}{
		{hold, `distlock: etcd lock "ledger": hold: lock lost`},
		{&distlock.LockError{Name: "ledger", Op: distlock.OpValidate, Err: distlock.ErrInvalidName}, `distlock: lock "ledger": validate: invalid lock name`},
		{&distlock.OnceError{Name: "ledger", Slot: "s1", Op: distlock.OpLock, Err: lock}, `distlock: zookeeper lock "ledger", slot "s1": lock: context canceled; fn was not run`},
		{&distlock.OnceError{Name: "ledger", Slot: "s1", Op: distlock.OpMark, Err: hold}, `distlock: etcd lock "ledger" lost before slot "s1" was marked; fn was not run: hold: lock lost`},
		{&distlock.OnceError{Name: "other", Slot: "s1", Op: distlock.OpLock, Err: lock}, `distlock: lock "other", slot "s1": lock: distlock: zookeeper lock "ledger": lock: context canceled; fn was not run`},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
	var le *distlock.LockError
	if oe := (&distlock.OnceError{Name: "ledger", Slot: "s1", Op: distlock.OpLock, Err: lock}); !errors.As(oe, &le) || le != lock || !errors.Is(oe, context.Canceled) {
		t.Errorf("OnceError does not unwrap to its LockError")
	}
}
