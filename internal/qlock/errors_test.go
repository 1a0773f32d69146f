package qlock

import (
	"errors"
	"fmt"
	"testing"

	"github.com/distlock/distlock"
)

// TestInner: a Lease's error as the cause of another LockError of the
// same lock (Resign's) reads "op: cause", and errors.Is and errors.As
// still see through it.
func TestInner(t *testing.T) {
	unlock := &distlock.LockError{Backend: "etcd", Name: "e", Op: distlock.OpUnlock, Err: distlock.ErrReleased}
	hold := &distlock.LockError{Backend: "etcd", Name: "e", Op: distlock.OpHold, Err: distlock.ErrLost}
	for _, c := range []struct {
		cause error
		want  string
	}{
		{unlock, `distlock: etcd lock "e": resign: not the leader: unlock: lock already released`},
		{errors.Join(nil, unlock), `distlock: etcd lock "e": resign: not the leader: unlock: lock already released`},
		{errors.Join(hold, unlock), "distlock: etcd lock \"e\": resign: not the leader: hold: lock lost\nunlock: lock already released"},
	} {
		err := error(&distlock.LockError{Backend: "etcd", Name: "e", Op: distlock.OpResign, Err: fmt.Errorf("%w: %w", distlock.ErrNotLeader, inner(c.cause))})
		if got := err.Error(); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
		var le *distlock.LockError
		if !errors.As(err, &le) || le.Op != distlock.OpResign || !errors.Is(err, distlock.ErrReleased) || !errors.Is(err, distlock.ErrNotLeader) {
			t.Errorf("%v: errors.As/Is do not see through it", err)
		}
	}
}
