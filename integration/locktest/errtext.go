package locktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/distlock/distlock"
)

// LockErrorOps are the operations a *distlock.LockError can name: those
// of errors.go, and OpRevoke. (OpCheck and OpMark are a OnceError's.)
var LockErrorOps = []distlock.Op{
	distlock.OpValidate, distlock.OpLock, distlock.OpTryLock, distlock.OpUnlock, distlock.OpHold,
	distlock.OpCampaign, distlock.OpProclaim, distlock.OpResign, distlock.OpLeader,
	distlock.OpAcquire, distlock.OpTryAcquire, distlock.OpRevoke,
}

// ErrorTexts provokes an error of every operation in LockErrorOps on b,
// whose store distlock.LockError.Backend calls backend ("etcd",
// "zookeeper"), and checks what distlock.LockError's doc promises: each
// is a *distlock.LockError of that operation, backend and lock, returned
// as it is, whose text starts `distlock: BACKEND lock "NAME": OP: ` and
// does not name the library, a backend package ("etcdlock:", "zklock:"),
// a backend or the lock again after that, and errors.Is still finds its
// cause.
func ErrorTexts(t *testing.T, b Backend, backend string) {
	s1, s2 := b.Session(t), b.Session(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	seen := map[distlock.Op]bool{}
	check := func(op distlock.Op, name string, err error, cause error) {
		t.Helper()
		seen[op] = true
		if err == nil {
			t.Errorf("%s %q: no error", op, name)
			return
		}
		msg := err.Error()
		t.Logf("%s: %s", op, msg)
		le, ok := err.(*distlock.LockError)
		if !ok {
			t.Errorf("%s %q: %T, want the *distlock.LockError itself: %s", op, name, err, msg)
			if !errors.As(err, &le) {
				return
			}
		}
		if le.Op != op || le.Name != name || le.Backend != backend {
			t.Errorf("%s %q: LockError{Backend: %q, Name: %q, Op: %q}, want %q, %q, %q", op, name, le.Backend, le.Name, le.Op, backend, name, op)
		}
		want := fmt.Sprintf("distlock: %s lock %q: %s: ", backend, name, op)
		if !strings.HasPrefix(msg, want) {
			t.Errorf("%s %q: %q does not start with %q", op, name, msg, want)
		}
		// The cause after the prefix names neither the library, nor a
		// backend package, nor the lock (as "lock NAME") again. (It may
		// quote the store, whose own words can name it: "etcdserver:".)
		rest := strings.TrimPrefix(msg, want)
		for _, again := range []string{"distlock:", "etcdlock:", "zklock:", fmt.Sprintf("lock %q", name), "etcd lock", "zookeeper lock"} {
			if strings.Contains(rest, again) {
				t.Errorf("%s %q: %q says %q again after its prefix", op, name, msg, again)
			}
		}
		if !errors.Is(err, cause) {
			t.Errorf("%s %q: %q does not match %v", op, name, msg, cause)
		}
	}

	// validate: a bad name, from a constructor and from Revoke; a bad
	// permit count.
	_, err := s1.Mutex("a//b")
	check(distlock.OpValidate, "a//b", err, distlock.ErrInvalidName)
	_, err = b.Revoke(Ctx(t), "a//c", distlock.RevokeRequest{Reason: "test"})
	check(distlock.OpValidate, "a//c", err, distlock.ErrInvalidName)
	_, err = b.Revocations(Ctx(t), "a//d")
	check(distlock.OpValidate, "a//d", err, distlock.ErrInvalidName)
	_, err = s1.Semaphore("sem0", 0)
	check(distlock.OpValidate, "sem0", err, distlock.ErrInvalidPermits)

	// lock, trylock, unlock, hold.
	m1, m2 := mutex(t, s1, "ledger"), mutex(t, s2, "ledger")
	_, err = m1.Lock(cancelled)
	check(distlock.OpLock, "ledger", err, context.Canceled)
	l := MustLock(t, m1)
	_, err = m2.TryLock(Ctx(t))
	check(distlock.OpTryLock, "ledger", err, distlock.ErrLocked)
	MustUnlock(t, l)
	check(distlock.OpUnlock, "ledger", l.Unlock(Ctx(t)), distlock.ErrReleased)

	// The same of a multi-lock, whose errors name its sorted names joined
	// by "+" (as given, when they are refused).
	_, err = s1.MultiMutex("x", "x")
	check(distlock.OpValidate, "x+x", err, distlock.ErrInvalidName)
	mm1, mm2 := multi(t, s1, "ledger", "books"), multi(t, s2, "books", "ledger")
	_, err = mm1.Lock(cancelled)
	check(distlock.OpLock, "books+ledger", err, context.Canceled)
	ml := MustLock(t, mm1)
	_, err = mm2.TryLock(Ctx(t))
	check(distlock.OpTryLock, "books+ledger", err, distlock.ErrLocked)
	MustUnlock(t, ml)
	check(distlock.OpUnlock, "books+ledger", ml.Unlock(Ctx(t)), distlock.ErrReleased)

	// campaign, leader, proclaim and resign (each wrapping the Lease's
	// own LockError: the lock is named once all the same).
	e1, err := s1.Election("leader")
	if err != nil {
		t.Fatal(err)
	}
	_, err = e1.Campaign(cancelled, "a")
	check(distlock.OpCampaign, "leader", err, context.Canceled)
	_, err = e1.Leader(Ctx(t))
	check(distlock.OpLeader, "leader", err, distlock.ErrNoLeader)
	lead, err := e1.Campaign(Ctx(t), "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := lead.Resign(Ctx(t)); err != nil {
		t.Fatal(err)
	}
	check(distlock.OpProclaim, "leader", lead.Proclaim(Ctx(t), "b"), distlock.ErrNotLeader)
	err = lead.Resign(Ctx(t))
	check(distlock.OpResign, "leader", err, distlock.ErrReleased)
	if !errors.Is(err, distlock.ErrNotLeader) {
		t.Errorf("second Resign: %v, want ErrNotLeader", err)
	}

	// acquire, tryacquire.
	sem1, err := s1.Semaphore("pool", 1)
	if err != nil {
		t.Fatal(err)
	}
	sem2, err := s2.Semaphore("pool", 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sem1.Acquire(cancelled)
	check(distlock.OpAcquire, "pool", err, context.Canceled)
	p, err := sem1.Acquire(Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sem2.TryAcquire(Ctx(t))
	check(distlock.OpTryAcquire, "pool", err, distlock.ErrLocked)
	if err := p.Release(Ctx(t)); err != nil {
		t.Fatal(err)
	}

	// revoke: a request without a reason.
	_, err = b.Revoke(Ctx(t), "ledger", distlock.RevokeRequest{})
	check(distlock.OpRevoke, "ledger", err, distlock.ErrInvalidRevoke)

	// hold: the holder's session ends on the server; then Unlock reports
	// the loss, and Resign a lost leadership, naming the lock once.
	l = MustLock(t, m2)
	ml = MustLock(t, multi(t, s2, "maps", "books"))
	lead, err = e1.Campaign(Ctx(t), "a")
	if err != nil {
		t.Fatal(err)
	}
	s2.End(t)
	Recv(t, l.Done(), "the lost lock's Done")
	check(distlock.OpHold, "ledger", l.Err(), distlock.ErrLost)
	check(distlock.OpHold, "ledger", l.Unlock(Ctx(t)), distlock.ErrLost)
	Recv(t, ml.Done(), "the lost multi-lock's Done")
	check(distlock.OpHold, "books+maps", ml.Err(), distlock.ErrLost)
	check(distlock.OpHold, "books+maps", ml.Unlock(Ctx(t)), distlock.ErrLost)
	s1.End(t)
	Recv(t, lead.Done(), "the lost leadership's Done")
	err = lead.Resign(Ctx(t))
	check(distlock.OpResign, "leader", err, distlock.ErrLost)

	for _, op := range LockErrorOps {
		if !seen[op] {
			t.Errorf("no error of op %q provoked", op)
		}
	}
}
