package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// DelayBackend is a Backend whose sessions can be made with a lock-delay
// (the stores' WithLockDelay), for RunLockDelay.
type DelayBackend interface {
	Backend
	// DelayedSession is Session with lock-delay d.
	DelayedSession(t *testing.T, d time.Duration) Session
}

// LockDelay is the delay RunLockDelay's cases set: long enough to stand
// apart from a handoff (milliseconds) on a loaded machine.
const LockDelay = 3 * time.Second

// delaySlack bounds, generously, how late past the delay a waiter may be
// granted: its watch's event, its lease check (etcd), its Confirm.
const delaySlack = 5 * time.Second

// RunLockDelay runs the lock-delay cases, each on a new backend: a
// holder whose session ended on the server holds its successor back for
// the delay (a Mutex, an RWMutex writer behind a reader, a MultiMutex);
// a clean Unlock does not; a waiter cancelled during its delay returns at
// once and leaves no entry (and the waiter behind it is still held back);
// a waiter ahead that ended while only waiting causes no delay.
func RunLockDelay(t *testing.T, newBackend func(t *testing.T) DelayBackend) {
	cases := []struct {
		name string
		run  func(t *testing.T, b DelayBackend)
	}{
		{"HolderSessionEnds", func(t *testing.T, b DelayBackend) { delayAfterEnd(t, b, "mutex") }},
		{"ReaderSessionEnds", func(t *testing.T, b DelayBackend) { delayAfterEnd(t, b, "rw") }},
		{"MultiHolderSessionEnds", func(t *testing.T, b DelayBackend) { delayAfterEnd(t, b, "multi") }},
		{"CleanUnlockNoDelay", delayCleanUnlock},
		{"UnlockThenCloseNoDelay", delayUnlockThenClose},
		{"CancelDuringDelay", delayCancel},
		{"WaiterAheadEndsNoDelay", delayWaiterAheadEnds},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newBackend(t)) })
	}
}

// delayAfterEnd: the holder's session ends on the server (etcd: its lease
// revoked by another client; ZooKeeper: its session expired); the waiter,
// with a lock-delay, is granted no earlier than the delay after it saw the
// entry go, and its Lease says so. kind is the holder's and waiter's
// lock: "mutex" (both Lock), "rw" (a reader holds, a writer waits),
// "multi" (both MultiMutex of two names, the entry watched on the first).
func delayAfterEnd(t *testing.T, b DelayBackend, kind string) {
	name := "delay-end-" + kind
	holder := b.Session(t)
	waiter := b.DelayedSession(t, LockDelay)
	var take, wait func(ctx context.Context) (*distlock.Lease, error)
	switch kind {
	case "mutex":
		take, wait = mutex(t, holder, name).Lock, mutex(t, waiter, name).Lock
	case "rw":
		hm, err := holder.RWMutex(name)
		if err != nil {
			t.Fatal(err)
		}
		wm, err := waiter.RWMutex(name)
		if err != nil {
			t.Fatal(err)
		}
		take, wait = hm.RLock, wm.Lock
	case "multi":
		hm, err := holder.MultiMutex(name, name+"-2")
		if err != nil {
			t.Fatal(err)
		}
		wm, err := waiter.MultiMutex(name, name+"-2")
		if err != nil {
			t.Fatal(err)
		}
		take, wait = hm.Lock, wm.Lock
	}
	held, err := take(Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan Result, 1)
	go func() {
		l, err := wait(Ctx(t))
		res <- Result{l, err}
	}()
	b.WaitEntries(t, name, 2)
	hKey := b.Entries(t, name)[0]
	gone := b.DeletionOrder(t, name, []string{hKey})
	ended := time.Now()
	holder.End(t)
	_, at := gone()
	l := Successor(t, res, held.Token(), "the waiter behind the ended holder")
	defer MustUnlock(t, l)
	granted := time.Now()
	if since := granted.Sub(ended); since < LockDelay {
		t.Fatalf("granted %v after the holder's session was ended, before the lock-delay %v", since, LockDelay)
	}
	// The waiter's delay counts from when it saw the entry go, about
	// when the test heard of it (another connection): a few milliseconds
	// either way.
	if since := granted.Sub(at[0]); since < LockDelay-100*time.Millisecond || since > LockDelay+delaySlack {
		t.Fatalf("granted %v after the holder's entry went, want the lock-delay %v (and less than %v more)", since, LockDelay, delaySlack)
	}
	// Served from when it saw the entry go (less the lease check, on
	// etcd) to when its timer fired.
	if d := l.LockDelay(); d < LockDelay-500*time.Millisecond || d > LockDelay+delaySlack {
		t.Fatalf("Lease.LockDelay() = %v, want about the lock-delay %v", d, LockDelay)
	}
}

// watchSet gives a waiter whose entry is queued the time to set its
// watch on the entry ahead (a round trip after its enqueue), which no
// store notification tells. An entry that goes before the watch is set
// counts as not released on ZooKeeper (its release mark is gone with it),
// so the cases that assert "no delay" release only after this.
func watchSet() { time.Sleep(500 * time.Millisecond) }

// delayCleanUnlock: a clean Unlock hands over at once, with no delay.
func delayCleanUnlock(t *testing.T, b DelayBackend) {
	const name = "delay-clean"
	holder := b.DelayedSession(t, LockDelay)
	waiter := b.DelayedSession(t, LockDelay)
	held := MustLock(t, mutex(t, holder, name))
	res := LockAsync(Ctx(t), mutex(t, waiter, name))
	b.WaitEntries(t, name, 2)
	watchSet()
	start := time.Now()
	MustUnlock(t, held)
	l := Successor(t, res, held.Token(), "the waiter behind a clean Unlock")
	defer MustUnlock(t, l)
	// A handoff takes milliseconds; anything near the delay is one.
	if took := time.Since(start); took >= LockDelay/2 {
		t.Fatalf("granted %v after a clean Unlock, want a handoff well within the lock-delay %v", took, LockDelay)
	}
	if d := l.LockDelay(); d != 0 {
		t.Fatalf("Lease.LockDelay() = %v after a clean Unlock, want 0", d)
	}
}

// delayUnlockThenClose: a holder (with the same lock-delay, as every
// process of the lock should have) that Unlocks and at once closes its
// session hands over without a delay: the session's end after the
// release does not make the release one. Several times, for the race
// between the close and the waiter's look at how the entry went.
func delayUnlockThenClose(t *testing.T, b DelayBackend) {
	const name = "delay-unlock-close"
	for i := range 5 {
		holder := b.DelayedSession(t, LockDelay)
		waiter := b.DelayedSession(t, LockDelay)
		held := MustLock(t, mutex(t, holder, name))
		res := LockAsync(Ctx(t), mutex(t, waiter, name))
		b.WaitEntries(t, name, 2)
		watchSet()
		start := time.Now()
		MustUnlock(t, held)
		holder.Close(t)
		l := Successor(t, res, held.Token(), "the waiter behind an Unlock and a Close")
		took := time.Since(start)
		if d := l.LockDelay(); d != 0 || took >= LockDelay/2 {
			t.Fatalf("round %d: granted %v after Unlock and Close, Lease.LockDelay() = %v, want a handoff without a delay", i, took, d)
		}
		MustUnlock(t, l)
		waiter.Close(t)
	}
}

// delayCancel: a waiter cancelled while it serves its delay returns at
// once; its entry does not outlive the delay; and the waiter behind it is
// still granted no earlier than the delay after the holder's session
// ended.
func delayCancel(t *testing.T, b DelayBackend) {
	const name = "delay-cancel"
	holder := b.Session(t)
	first := b.DelayedSession(t, LockDelay)
	second := b.DelayedSession(t, LockDelay)
	held := MustLock(t, mutex(t, holder, name))
	ctx, cancel := context.WithCancel(Ctx(t))
	defer cancel()
	res1 := LockAsync(ctx, mutex(t, first, name))
	b.WaitEntries(t, name, 2)
	res2 := LockAsync(Ctx(t), mutex(t, second, name))
	b.WaitEntries(t, name, 3)
	keys := b.Entries(t, name)
	gone := b.DeletionOrder(t, name, keys[:2])
	ended := time.Now()
	holder.End(t)
	// Well inside the delay: the first waiter has seen the holder's entry
	// go (an event on its own connection, milliseconds) and serves it.
	time.Sleep(LockDelay / 3)
	notYet(t, "the first waiter", res1)
	cancel()
	cancelled := time.Now()
	r := Recv(t, res1, "the cancelled waiter")
	if r.Err == nil || !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("cancelled waiter: err %v, want context.Canceled", r.Err)
	}
	if took := time.Since(cancelled); took > time.Second {
		t.Fatalf("cancelled waiter returned %v after the cancel, want at once", took)
	}
	order, at := gone()
	if order[1] != keys[1] {
		t.Fatalf("deletions %q, want the holder's then the waiter's", order)
	}
	if late := at[1].Sub(ended); late > LockDelay+delaySlack {
		t.Fatalf("the cancelled waiter's entry went %v after the holder's session ended, past the delay %v", late, LockDelay)
	}
	l := Successor(t, res2, held.Token(), "the waiter behind the cancelled one")
	if since := time.Since(ended); since < LockDelay {
		t.Fatalf("the waiter behind the cancelled one was granted %v after the holder's session ended, before the lock-delay %v", since, LockDelay)
	}
	MustUnlock(t, l)
	if left := b.Entries(t, name); len(left) != 0 {
		t.Fatalf("entries left: %q", left)
	}
}

// delayWaiterAheadEnds: a waiter ahead whose session ends while it only
// waits (the holder still holds) causes no delay: the holder's clean
// Unlock hands over at once.
func delayWaiterAheadEnds(t *testing.T, b DelayBackend) {
	const name = "delay-waiter-ends"
	holder := b.Session(t)
	middle := b.Session(t)
	last := b.DelayedSession(t, LockDelay)
	held := MustLock(t, mutex(t, holder, name))
	res1 := LockAsync(Ctx(t), mutex(t, middle, name))
	b.WaitEntries(t, name, 2)
	res2 := LockAsync(Ctx(t), mutex(t, last, name))
	b.WaitEntries(t, name, 3)
	keys := b.Entries(t, name)
	gone := b.DeletionOrder(t, name, keys[1:2])
	middle.End(t)
	gone()
	if r := Recv(t, res1, "the ended waiter"); r.Err == nil {
		MustUnlock(t, r.Lease)
		t.Fatal("the waiter whose session ended acquired")
	}
	// The last waiter hears of the middle one's going and turns to the
	// holder: nothing the test can watch, so a generous pause (an event
	// and one read, milliseconds) before the Unlock.
	time.Sleep(time.Second)
	notYet(t, "the last waiter", res2)
	start := time.Now()
	MustUnlock(t, held)
	l := Successor(t, res2, held.Token(), "the last waiter")
	defer MustUnlock(t, l)
	if took := time.Since(start); took >= LockDelay/2 {
		t.Fatalf("granted %v after the holder's clean Unlock, want a handoff well within the lock-delay %v", took, LockDelay)
	}
	if d := l.LockDelay(); d != 0 {
		t.Fatalf("Lease.LockDelay() = %v, want 0: the entry that ended was only waiting", d)
	}
}
