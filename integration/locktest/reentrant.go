package locktest

import (
	"errors"
	"testing"

	"github.com/distlock/distlock"
)

// notReentrant: a holder's second acquisition of its own lock, on the
// same Mutex or MultiMutex, is one more acquisition like anyone else's —
// TryLock loses with ErrLocked, Lock waits until the first Lease's Unlock
// (as the docs say: the locks are not reentrant).
func notReentrant(t *testing.T, b Backend) {
	s := b.Session(t)
	for _, c := range []struct {
		what  string
		names []string
		m     distlock.Locker
	}{
		{"Mutex", []string{"reent"}, mutex(t, s, "reent")},
		{"MultiMutex", []string{"reent/a", "reent/b"}, multi(t, s, "reent/a", "reent/b")},
	} {
		first := MustLock(t, c.m)
		if _, err := c.m.TryLock(Ctx(t)); !errors.Is(err, distlock.ErrLocked) {
			t.Fatalf("%s: the holder's own TryLock: %v, want ErrLocked", c.what, err)
		}
		second := LockAsync(Ctx(t), c.m)
		b.WaitEntries(t, c.names[0], 2) // the second Lock waits in the queue
		select {
		case r := <-second:
			t.Fatalf("%s: the holder's second Lock returned (%v, %v) before its first Unlock", c.what, r.Lease, r.Err)
		default:
		}
		MustUnlock(t, first)
		l := after(t, second, first.Token(), c.what+": the second Lock after the first Unlock")
		MustUnlock(t, l)
		wantEntriesEach(t, b, 0, c.what+": after both", c.names...)
	}
}
