// Package locktest is the contract every distlock backend's Mutex must
// meet, as one suite of tests run against real servers: FIFO order, TryLock
// races, failure paths that leave nothing behind, sessions that end while
// waiting or holding, double unlock, bad names. A backend's tests call Run
// with a factory for its store; what differs between stores (how to list a
// lock's entries, how to end a session on the server) stays behind the
// Backend interface.
package locktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// Timeout bounds every wait in the suite: a failure bound, not a timing
// assertion.
const Timeout = 30 * time.Second

// Backend is one store, fresh for each case.
type Backend interface {
	// Session opens a new session on a client of its own, as another
	// process would; it is closed when the test ends.
	Session(t *testing.T) Session
	// ObservedSession is Session reporting metrics and spans as o says.
	ObservedSession(t *testing.T, o Observed) Session
	// Entries lists the entries queued for lock or election name (lock
	// entries and candidates alike), oldest first.
	Entries(t *testing.T, name string) []string
	// WaitEntries blocks until name has at least n entries (as Entries
	// counts them), waiting on the store's notifications, not on time.
	WaitEntries(t *testing.T, name string, n int)
	// SemaphoreEntries lists semaphore name's line entries (oldest first)
	// and its slot keys or znodes.
	SemaphoreEntries(t *testing.T, name string) (line, slots []string)
	// WaitLine blocks until semaphore name's line has at least n entries,
	// waiting on the store's notifications.
	WaitLine(t *testing.T, name string, n int)
	// DeletionOrder starts following keys, entries of lock name as
	// Entries and SemaphoreEntries name them, all present now; the
	// returned function blocks until every one of them is deleted and
	// returns them in the order the store deleted them (etcd: by
	// revision; ZooKeeper: by zxid, as one connection's watch events are
	// ordered), with when the test heard of each deletion.
	DeletionOrder(t *testing.T, name string, keys []string) func() ([]string, []time.Time)
	// Revoker revokes the backend's locks, and lists their revocations.
	Revoker
}

// Session is one backend session.
type Session interface {
	// Mutex returns the lock called name on this session.
	Mutex(name string) (distlock.Locker, error)
	// MultiMutex returns the multi-lock of names on this session.
	MultiMutex(names ...string) (distlock.Locker, error)
	// RWMutex returns the readers-writer lock called name on this session.
	RWMutex(name string) (RWLocker, error)
	// Election returns the election called name on this session; its
	// candidates count as entries of name for Backend.Entries and
	// WaitEntries.
	Election(name string) (Elector, error)
	// Semaphore returns the semaphore called name, of n permits, on this
	// session.
	Semaphore(name string, n int) (Semaphore, error)
	// End ends the session on the server, as if it had expired (etcd:
	// revoke its lease; ZooKeeper: expire its session), without telling the
	// client first.
	End(t *testing.T)
	// Close closes the session as its owner would.
	Close(t *testing.T)
	// TTL is the session's TTL (etcd) or timeout (ZooKeeper).
	TTL() time.Duration
	// Cut closes the session's client (etcd) or connection (ZooKeeper)
	// under it, as a client that loses every server at once: nothing
	// confirms the session any more.
	Cut(t *testing.T)
}

// Run runs every case of the contract, each on a new Backend.
func Run(t *testing.T, newBackend func(t *testing.T) Backend) {
	cases := []struct {
		name string
		run  func(t *testing.T, b Backend)
	}{
		{"FIFOOrder", fifoOrder},
		{"TryLockExactlyOne", tryLockExactlyOne},
		{"CancelWaitingLeavesNothing", cancelWaiting},
		{"WaiterSessionEnds", waiterSessionEnds},
		{"HolderSessionEnds", holderSessionEnds},
		{"MiddleWaiterDies", middleWaiterDies},
		{"SameSessionExcludes", sameSessionExcludes},
		{"NamesDoNotInterfere", namesDoNotInterfere},
		{"DoubleUnlock", doubleUnlock},
		{"NotReentrant", notReentrant},
		{"Do", do},
		{"InvalidNames", invalidNames},
		{"TokensNameTheirOwner", tokensNameTheirOwner},
		{"LeaseDeadline", leaseDeadline},
		{"WaiterEndsAtHandoff", endRace},
	}
	cases = append(cases, rwCases...)
	cases = append(cases, electionCases...)
	cases = append(cases, telemetryCases...)
	cases = append(cases, semaphoreCases...)
	cases = append(cases, revokeCases...)
	cases = append(cases, multiCases...)
	cases = append(cases, runAsLeaderCases...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newBackend(t)) })
	}
}

// Ctx returns a context bounded by Timeout, cancelled when the test ends.
func Ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

func mutex(t *testing.T, s Session, name string) distlock.Locker {
	t.Helper()
	m, err := s.Mutex(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// MustLock locks m or fails the test.
func MustLock(t *testing.T, m distlock.Locker) *distlock.Lease {
	t.Helper()
	l, err := m.Lock(Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// MustUnlock unlocks l or fails the test.
func MustUnlock(t *testing.T, l *distlock.Lease) {
	t.Helper()
	if err := l.Unlock(Ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// Result is what a Lock running in the background returned.
type Result struct {
	Lease *distlock.Lease
	Err   error
}

// LockAsync runs m.Lock(ctx) in a goroutine.
func LockAsync(ctx context.Context, m distlock.Locker) <-chan Result {
	ch := make(chan Result, 1)
	go func() {
		l, err := m.Lock(ctx)
		ch <- Result{l, err}
	}()
	return ch
}

// Recv receives from ch, failing the test after Timeout.
func Recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(Timeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// Successor waits for a background Lock and checks that it acquired with
// a token newer than prev.
func Successor(t *testing.T, res <-chan Result, prev distlock.Token, what string) *distlock.Lease {
	t.Helper()
	r := Recv(t, res, what)
	if r.Err != nil {
		t.Fatalf("%s: %v", what, r.Err)
	}
	if !r.Lease.Token().Newer(prev) {
		t.Fatalf("%s: token %v not newer than %v", what, r.Lease.Token(), prev)
	}
	return r.Lease
}

// notYet fails if any of the background Locks has returned.
func notYet(t *testing.T, what string, results ...<-chan Result) {
	t.Helper()
	for _, ch := range results {
		select {
		case r := <-ch:
			t.Fatalf("%s returned (err %v) while the lock is held", what, r.Err)
		default:
		}
	}
}

func wantEntries(t *testing.T, b Backend, name string, n int, why string) {
	t.Helper()
	if e := b.Entries(t, name); len(e) != n {
		t.Fatalf("%s: entries %v, want %d", why, e, n)
	}
}

func fifoOrder(t *testing.T, b Backend) {
	holder := MustLock(t, mutex(t, b.Session(t), "fifo"))
	const n = 5
	results := make([]<-chan Result, n)
	for i := range n {
		// Each waiter has its own session, like a separate process; the
		// next one starts only once this one is queued.
		results[i] = LockAsync(Ctx(t), mutex(t, b.Session(t), "fifo"))
		b.WaitEntries(t, "fifo", i+2)
	}
	prev := holder.Token()
	MustUnlock(t, holder)
	for i := range n {
		l := Successor(t, results[i], prev, fmt.Sprintf("waiter %d", i))
		notYet(t, fmt.Sprintf("a waiter behind %d", i), results[i+1:]...)
		prev = l.Token()
		MustUnlock(t, l)
	}
	wantEntries(t, b, "fifo", 0, "after all released")
}

func tryLockExactlyOne(t *testing.T, b Backend) {
	const n = 5
	muts := make([]distlock.Locker, n)
	for i := range muts {
		muts[i] = mutex(t, b.Session(t), "try")
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		won    []*distlock.Lease
		locked int
	)
	start := make(chan struct{})
	for _, m := range muts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			l, err := m.TryLock(Ctx(t))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, l)
			case errors.Is(err, distlock.ErrLocked):
				locked++
			default:
				t.Errorf("TryLock: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(won) != 1 || locked != n-1 {
		t.Fatalf("%d winners, %d ErrLocked; want 1 and %d", len(won), locked, n-1)
	}
	wantEntries(t, b, "try", 1, "losers left entries behind")
	_, err := muts[0].TryLock(Ctx(t))
	var le *distlock.LockError
	if !errors.As(err, &le) || le.Name != "try" || le.Op != "trylock" {
		t.Fatalf("TryLock error %v: want a *LockError for lock \"try\"", err)
	}
	MustUnlock(t, won[0])
	l, err := muts[1].TryLock(Ctx(t))
	if err != nil {
		t.Fatalf("TryLock after release: %v", err)
	}
	MustUnlock(t, l)
}

func cancelWaiting(t *testing.T, b Backend) {
	holder := MustLock(t, mutex(t, b.Session(t), "cancel"))
	ctx, cancel := context.WithCancel(context.Background())
	res := LockAsync(ctx, mutex(t, b.Session(t), "cancel"))
	b.WaitEntries(t, "cancel", 2)
	cancel()
	if r := Recv(t, res, "cancelled Lock"); !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("Lock after cancel: %v, want context.Canceled", r.Err)
	}
	wantEntries(t, b, "cancel", 1, "after cancel")

	// A deadline that passes while waiting is the same failure path.
	dctx, dcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer dcancel()
	if _, err := mutex(t, b.Session(t), "cancel").Lock(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past deadline: %v", err)
	}
	wantEntries(t, b, "cancel", 1, "after deadline")
	MustUnlock(t, holder)
}

func waiterSessionEnds(t *testing.T, b Backend) {
	holder := MustLock(t, mutex(t, b.Session(t), "ends"))

	ws := b.Session(t)
	res := LockAsync(Ctx(t), mutex(t, ws, "ends"))
	b.WaitEntries(t, "ends", 2)
	ws.End(t)
	r := Recv(t, res, "Lock of the waiter whose session ended")
	if r.Err == nil {
		t.Fatal("Lock reported acquired after its session ended")
	}
	if !errors.Is(r.Err, distlock.ErrEntryGone) && !errors.Is(r.Err, distlock.ErrSessionExpired) {
		t.Fatalf("Lock after its session ended: %v, want ErrEntryGone or ErrSessionExpired", r.Err)
	}

	cs := b.Session(t)
	res = LockAsync(Ctx(t), mutex(t, cs, "ends"))
	b.WaitEntries(t, "ends", 2)
	cs.Close(t)
	if r := Recv(t, res, "Lock of the closed waiter"); !errors.Is(r.Err, distlock.ErrSessionClosed) {
		t.Fatalf("Lock after Close: %v, want ErrSessionClosed", r.Err)
	}
	if _, err := mutex(t, cs, "ends").Lock(Ctx(t)); !errors.Is(err, distlock.ErrSessionClosed) {
		t.Fatalf("Lock on a closed session: %v", err)
	}
	wantEntries(t, b, "ends", 1, "after the waiters' sessions ended")
	MustUnlock(t, holder)
}

func holderSessionEnds(t *testing.T, b Backend) {
	hs := b.Session(t)
	holder := MustLock(t, mutex(t, hs, "lost"))
	res := LockAsync(Ctx(t), mutex(t, b.Session(t), "lost"))
	b.WaitEntries(t, "lost", 2)
	hs.End(t)
	Recv(t, holder.Done(), "holder's Done")
	if err := holder.Err(); !errors.Is(err, distlock.ErrLost) {
		t.Fatalf("holder Err: %v, want ErrLost", err)
	}
	l := Successor(t, res, holder.Token(), "successor")
	if err := holder.Unlock(Ctx(t)); !errors.Is(err, distlock.ErrLost) {
		t.Fatalf("Unlock of a lost lock: %v, want ErrLost", err)
	}
	wantEntries(t, b, "lost", 1, "the lost holder's Unlock touched the successor's entry")
	MustUnlock(t, l)
}

func middleWaiterDies(t *testing.T, b Backend) {
	holder := MustLock(t, mutex(t, b.Session(t), "middle"))
	var sessions []Session
	var results []<-chan Result
	for i := range 3 {
		s := b.Session(t)
		sessions = append(sessions, s)
		results = append(results, LockAsync(Ctx(t), mutex(t, s, "middle")))
		b.WaitEntries(t, "middle", i+2)
	}
	// The middle waiter's process dies: nothing of it cleans up, the
	// server ends its session.
	sessions[1].End(t)
	if r := Recv(t, results[1], "dead waiter"); r.Err == nil {
		t.Fatal("the dead waiter acquired")
	}
	MustUnlock(t, holder)
	first := Successor(t, results[0], holder.Token(), "first waiter")
	notYet(t, "the last waiter", results[2])
	MustUnlock(t, first)
	MustUnlock(t, Successor(t, results[2], first.Token(), "last waiter"))
}

func sameSessionExcludes(t *testing.T, b Backend) {
	m := mutex(t, b.Session(t), "one-session")
	first := MustLock(t, m)
	res := LockAsync(Ctx(t), m)
	b.WaitEntries(t, "one-session", 2) // the second goroutine's own entry
	notYet(t, "a second Lock on the same session", res)
	MustUnlock(t, first)
	MustUnlock(t, Successor(t, res, first.Token(), "second Lock"))
}

func namesDoNotInterfere(t *testing.T, b Backend) {
	s := b.Session(t)
	a := MustLock(t, mutex(t, s, "a"))
	ab := MustLock(t, mutex(t, s, "a/b"))
	if _, err := mutex(t, s, "a").TryLock(Ctx(t)); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock a: %v", err)
	}
	MustUnlock(t, a)
	l, err := mutex(t, s, "a").TryLock(Ctx(t))
	if err != nil {
		t.Fatalf("TryLock a while a/b is held: %v", err)
	}
	MustUnlock(t, l)
	MustUnlock(t, ab)
}

func doubleUnlock(t *testing.T, b Backend) {
	l := MustLock(t, mutex(t, b.Session(t), "twice"))
	MustUnlock(t, l)
	if err := l.Unlock(Ctx(t)); !errors.Is(err, distlock.ErrReleased) {
		t.Fatalf("second Unlock: %v, want ErrReleased", err)
	}
	if !errors.Is(l.Err(), distlock.ErrReleased) {
		t.Fatalf("Err after Unlock: %v", l.Err())
	}
}

func do(t *testing.T, b Backend) {
	m := mutex(t, b.Session(t), "do")
	var got distlock.Token
	err := distlock.Do(Ctx(t), m, func(ctx context.Context, tok distlock.Token) error {
		got = tok
		wantEntries(t, b, "do", 1, "while held")
		return nil
	})
	if err != nil || got.Name != "do" || got.Validate() != nil {
		t.Fatalf("Do: err %v, token %v", err, got)
	}
	wantEntries(t, b, "do", 0, "after Do")
}

func invalidNames(t *testing.T, b Backend) {
	s := b.Session(t)
	for _, name := range []string{"", "/a", "a/", "a//b", "a/../b", "a@1", "a b", "ä"} {
		if _, err := s.Mutex(name); !errors.Is(err, distlock.ErrInvalidName) {
			t.Errorf("name %q: %v, want ErrInvalidName", name, err)
		}
	}
}

// tokensNameTheirOwner: every kind of acquisition (Lock, TryLock, RLock,
// TryRLock, Campaign) gives a valid token that names its session — the
// same owner for one session's acquisitions, different owners for two
// sessions — so that a fence can tell apart two acquisitions a rebuilt or
// restored cluster issues with one sequence number.
func tokensNameTheirOwner(t *testing.T, b Backend) {
	ctx := Ctx(t)
	owners := map[uint64]bool{}
	for i := range 2 {
		s := b.Session(t)
		var toks []distlock.Token
		m := mutex(t, s, fmt.Sprintf("own/m%d", i))
		for _, acquire := range []func(context.Context) (*distlock.Lease, error){m.Lock, m.TryLock} {
			l, err := acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			toks = append(toks, l.Token())
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		rw, err := s.RWMutex(fmt.Sprintf("own/rw%d", i))
		if err != nil {
			t.Fatal(err)
		}
		for _, acquire := range []func(context.Context) (*distlock.Lease, error){rw.RLock, rw.TryRLock, rw.Lock, rw.TryLock} {
			l, err := acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			toks = append(toks, l.Token())
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		el, err := s.Election(fmt.Sprintf("own/e%d", i))
		if err != nil {
			t.Fatal(err)
		}
		ld, err := el.Campaign(ctx, "me")
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, ld.Token())
		info, err := el.Leader(ctx)
		if err != nil || info.Token != ld.Token() {
			t.Errorf("Leader() = %v, %v; want the leadership's token %v", info, err, ld.Token())
		}
		if err := ld.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		for _, tok := range toks {
			if err := tok.Validate(); err != nil {
				t.Errorf("session %d: token %v: %v", i, tok, err)
			}
			if tok.Owner != toks[0].Owner {
				t.Errorf("session %d: tokens %v and %v of one session name different owners", i, toks[0], tok)
			}
		}
		if owners[toks[0].Owner] {
			t.Errorf("two sessions' tokens name one owner %x", toks[0].Owner)
		}
		owners[toks[0].Owner] = true
	}
}
