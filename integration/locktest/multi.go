package locktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
)

// multiCases are the contract of the multi-lock (a backend's MultiMutex).
var multiCases = []struct {
	name string
	run  func(t *testing.T, b Backend)
}{
	{"MultiExcludesPerName", multiExcludes},
	{"MultiOppositeOrders", multiOppositeOrders},
	{"MultiTokens", multiTokens},
	{"MultiCancelLeavesNothing", multiCancel},
	{"MultiTryLock", multiTryLock},
	{"MultiSessionEnds", multiSessionEnds},
	{"MultiEntryLostWhileHeld", multiEntryLost},
	{"MultiMixesWithMutex", multiMixes},
	{"MultiInvalidNames", multiInvalidNames},
	{"MultiFenceRefusesStaleName", multiFence},
	{"MultiDoLease", multiDoLease},
}

func multi(t *testing.T, s Session, names ...string) distlock.Locker {
	t.Helper()
	m, err := s.MultiMutex(names...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// after is Successor for locks of several names: it compares sequence
// numbers, which every name of one store shares.
func after(t *testing.T, res <-chan Result, prev distlock.Token, what string) *distlock.Lease {
	t.Helper()
	r := Recv(t, res, what)
	if r.Err != nil {
		t.Fatalf("%s: %v", what, r.Err)
	}
	if r.Lease.Token().Seq <= prev.Seq {
		t.Fatalf("%s: token %v not after %v", what, r.Lease.Token(), prev)
	}
	return r.Lease
}

// wantEntriesEach checks the number of entries of every name.
func wantEntriesEach(t *testing.T, b Backend, n int, why string, names ...string) {
	t.Helper()
	for _, name := range names {
		wantEntries(t, b, name, n, fmt.Sprintf("%s (lock %s)", why, name))
	}
}

// multiExcludes runs clients in sessions of their own that take random
// overlapping sets of names (in random orders, some with a plain Mutex of
// one name), and checks that no two ever hold one name together, with a
// counter per name, and that every client finishes (no deadlock).
func multiExcludes(t *testing.T, b Backend) {
	pool := []string{"mx/a", "mx/b", "mx/c", "mx/d"}
	const clients, rounds = 8, 6
	var (
		mu      sync.Mutex
		holding = map[string]int{}
		counts  = map[string]int{}
		wg      sync.WaitGroup
		errs    = make(chan error, clients)
	)
	sessions := make([]Session, clients)
	for i := range sessions {
		sessions[i] = b.Session(t)
	}
	for i, s := range sessions {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for r := range rounds {
				names := slices.Clone(pool)
				rng.Shuffle(len(names), func(a, b int) { names[a], names[b] = names[b], names[a] })
				names = names[:1+rng.IntN(len(names))]
				var m distlock.Locker
				var err error
				if len(names) == 1 && r%2 == 0 {
					m, err = s.Mutex(names[0])
				} else {
					m, err = s.MultiMutex(names...)
				}
				if err != nil {
					errs <- err
					return
				}
				l, err := m.Lock(Ctx(t))
				if err != nil {
					errs <- fmt.Errorf("client %d round %d, names %v: %w", i, r, names, err)
					return
				}
				mu.Lock()
				for _, n := range names {
					holding[n]++
					counts[n]++
					if holding[n] > 1 {
						errs <- fmt.Errorf("client %d round %d: %s held by %d acquisitions at once", i, r, n, holding[n])
					}
				}
				mu.Unlock()
				if got := l.Tokens(); len(got) != len(names) {
					errs <- fmt.Errorf("client %d: %d tokens for %d names", i, len(got), len(names))
				}
				mu.Lock()
				for _, n := range names {
					holding[n]--
				}
				mu.Unlock()
				if err := l.Unlock(Ctx(t)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	wantEntriesEach(t, b, 0, "after every client finished", pool...)
	t.Logf("acquisitions per name: %v", counts)
}

// multiOppositeOrders has two multi-locks list the same names in opposite
// orders while a Mutex holds one of them: both must acquire, one after
// the other, once it is released.
func multiOppositeOrders(t *testing.T, b Backend) {
	holder := MustLock(t, mutex(t, b.Session(t), "oo/b"))
	ab := LockAsync(Ctx(t), multi(t, b.Session(t), "oo/a", "oo/b"))
	b.WaitEntries(t, "oo/b", 2)
	ba := LockAsync(Ctx(t), multi(t, b.Session(t), "oo/b", "oo/a"))
	b.WaitEntries(t, "oo/b", 3)
	notYet(t, "a multi-lock behind the Mutex", ab, ba)
	MustUnlock(t, holder)
	first := after(t, ab, holder.Token(), "the first multi-lock")
	notYet(t, "the second multi-lock while the first holds", ba)
	MustUnlock(t, first)
	MustUnlock(t, after(t, ba, first.Token(), "the second multi-lock"))
	wantEntriesEach(t, b, 0, "after both released", "oo/a", "oo/b")
}

func multiTokens(t *testing.T, b Backend) {
	s := b.Session(t)
	before := MustLock(t, mutex(t, s, "tk/b"))
	MustUnlock(t, before)
	l := MustLock(t, multi(t, s, "tk/c", "tk/a", "tk/b"))
	ts := l.Tokens()
	names := make([]string, len(ts))
	for i, tok := range ts {
		names[i] = tok.Name
		if tok.Seq != ts[0].Seq || tok.Owner != ts[0].Owner || tok.Owner == 0 {
			t.Fatalf("tokens %v: want one sequence number and one owner", ts)
		}
	}
	if !slices.Equal(names, []string{"tk/a", "tk/b", "tk/c"}) {
		t.Fatalf("tokens %v: want one per name, sorted by name", ts)
	}
	if l.Token() != ts[0] {
		t.Fatalf("Token %v, want the first of Tokens %v", l.Token(), ts)
	}
	if !ts[1].Newer(before.Token()) {
		t.Fatalf("token %v not newer than the earlier Mutex's %v", ts[1], before.Token())
	}
	MustUnlock(t, l)
	err := l.Unlock(Ctx(t))
	var le *distlock.LockError
	if !errors.Is(err, distlock.ErrReleased) || !errors.As(err, &le) || le.Name != "tk/a+tk/b+tk/c" {
		t.Fatalf("second Unlock: %v, want ErrReleased naming tk/a+tk/b+tk/c", err)
	}
	after := MustLock(t, mutex(t, s, "tk/c"))
	if !after.Token().Newer(ts[2]) {
		t.Fatalf("a later Mutex's token %v not newer than the multi-lock's %v", after.Token(), ts[2])
	}
	MustUnlock(t, after)
	wantEntriesEach(t, b, 0, "after all released", "tk/a", "tk/b", "tk/c")
}

// multiCancel cancels a waiting multi-lock at each point of its wait
// (behind the first name, behind the second, behind both) and checks
// that none of its entries is left.
func multiCancel(t *testing.T, b Backend) {
	for _, held := range [][]string{{"mc/a"}, {"mc/b"}, {"mc/a", "mc/b"}} {
		t.Run(strings.Join(held, "+"), func(t *testing.T) {
			var holders []*distlock.Lease
			for _, n := range held {
				holders = append(holders, MustLock(t, mutex(t, b.Session(t), n)))
			}
			ctx, cancel := context.WithCancel(context.Background())
			res := LockAsync(ctx, multi(t, b.Session(t), "mc/a", "mc/b"))
			for _, n := range []string{"mc/a", "mc/b"} {
				b.WaitEntries(t, n, 1+len(slices.DeleteFunc(slices.Clone(held), func(h string) bool { return h != n })))
			}
			cancel()
			if r := Recv(t, res, "cancelled Lock"); !errors.Is(r.Err, context.Canceled) {
				t.Fatalf("Lock after cancel: %v, want context.Canceled", r.Err)
			}
			for _, n := range []string{"mc/a", "mc/b"} {
				want := 0
				if slices.Contains(held, n) {
					want = 1
				}
				wantEntries(t, b, n, want, "after cancel")
			}
			for _, h := range holders {
				MustUnlock(t, h)
			}
		})
	}
	// Cancelled at moments swept across the enqueue and the wait (one name
	// held meanwhile, and released at a moment swept too): whether it was
	// acquired or not, nothing of it may be left.
	s := b.Session(t)
	for i := range 24 {
		holder := MustLock(t, mutex(t, b.Session(t), "mc/b"))
		ctx, cancel := context.WithCancel(context.Background())
		res := LockAsync(ctx, multi(t, s, "mc/a", "mc/b"))
		at := time.Duration(i%8) * 400 * time.Microsecond
		time.AfterFunc(at, cancel)
		released := make(chan error, 1)
		time.AfterFunc(at*time.Duration(i/8), func() { released <- holder.Unlock(context.Background()) })
		if r := Recv(t, res, "Lock cancelled during its wait"); r.Err == nil {
			MustUnlock(t, r.Lease)
		} else if !errors.Is(r.Err, context.Canceled) {
			t.Fatalf("cancelled Lock: %v, want context.Canceled", r.Err)
		}
		if err := Recv(t, released, "the Mutex's release"); err != nil {
			t.Fatal(err)
		}
		wantEntriesEach(t, b, 0, fmt.Sprintf("after the Lock cancelled at %v", at), "mc/a", "mc/b")
	}
}

func multiTryLock(t *testing.T, b Backend) {
	m := multi(t, b.Session(t), "mt/a", "mt/b")
	l, err := m.TryLock(Ctx(t))
	if err != nil {
		t.Fatalf("TryLock of free names: %v", err)
	}
	if _, err := multi(t, b.Session(t), "mt/b", "mt/c").TryLock(Ctx(t)); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock overlapping a held name: %v, want ErrLocked", err)
	}
	wantEntries(t, b, "mt/c", 0, "a losing TryLock left an entry")
	wantEntriesEach(t, b, 1, "a losing TryLock touched the holder's entries", "mt/a", "mt/b")
	MustUnlock(t, l)
	held := MustLock(t, mutex(t, b.Session(t), "mt/c"))
	if _, err := m.TryLock(Ctx(t)); err != nil {
		t.Fatalf("TryLock of names another lock does not hold: %v", err)
	} else if _, err := multi(t, b.Session(t), "mt/a", "mt/c").TryLock(Ctx(t)); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock of a name a Mutex holds: %v, want ErrLocked", err)
	}
	wantEntriesEach(t, b, 1, "after the TryLocks", "mt/a", "mt/b", "mt/c")
	MustUnlock(t, held)
}

func multiSessionEnds(t *testing.T, b Backend) {
	holder := MustLock(t, mutex(t, b.Session(t), "ms/b"))
	ws := b.Session(t)
	res := LockAsync(Ctx(t), multi(t, ws, "ms/a", "ms/b"))
	b.WaitEntries(t, "ms/b", 2)
	ws.End(t)
	r := Recv(t, res, "Lock of the multi-lock whose session ended")
	if !errors.Is(r.Err, distlock.ErrEntryGone) && !errors.Is(r.Err, distlock.ErrSessionExpired) {
		t.Fatalf("Lock after its session ended: %v, want ErrEntryGone or ErrSessionExpired", r.Err)
	}
	wantEntries(t, b, "ms/a", 0, "after the waiter's session ended")
	wantEntries(t, b, "ms/b", 1, "after the waiter's session ended")
	MustUnlock(t, holder)

	hs := b.Session(t)
	l := MustLock(t, multi(t, hs, "ms/a", "ms/b"))
	next := LockAsync(Ctx(t), mutex(t, b.Session(t), "ms/a"))
	b.WaitEntries(t, "ms/a", 2)
	hs.End(t)
	Recv(t, l.Done(), "the multi-lock's Done")
	if err := l.Err(); !errors.Is(err, distlock.ErrLost) {
		t.Fatalf("Err after the session ended: %v, want ErrLost", err)
	}
	succ := after(t, next, l.Token(), "the Mutex behind the lost multi-lock")
	if err := l.Unlock(Ctx(t)); !errors.Is(err, distlock.ErrLost) {
		t.Fatalf("Unlock of a lost multi-lock: %v, want ErrLost", err)
	}
	wantEntries(t, b, "ms/a", 1, "the lost multi-lock's Unlock touched the successor's entry")
	MustUnlock(t, succ)
}

// multiEntryLost deletes one name's entry of a held multi-lock (a forced
// revocation of that name): the whole Lease is lost, naming the name, and
// Unlock removes the other entries.
func multiEntryLost(t *testing.T, b Backend) {
	l := MustLock(t, multi(t, b.Session(t), "ml/a", "ml/b"))
	if _, err := b.Revoke(Ctx(t), "ml/b", distlock.RevokeRequest{Reason: "contract test", Force: true}); err != nil {
		t.Fatal(err)
	}
	Recv(t, l.Done(), "the multi-lock's Done")
	err := l.Err()
	if !errors.Is(err, distlock.ErrLost) || !strings.Contains(err.Error(), `"ml/b"`) {
		t.Fatalf("Err after one entry was deleted: %v, want ErrLost naming ml/b", err)
	}
	wantEntries(t, b, "ml/a", 1, "before Unlock")
	if err := l.Unlock(Ctx(t)); !errors.Is(err, distlock.ErrLost) {
		t.Fatalf("Unlock: %v, want the loss", err)
	}
	wantEntriesEach(t, b, 0, "after Unlock", "ml/a", "ml/b")
}

// multiMixes queues a multi-lock and Mutexes of its names in one queue.
func multiMixes(t *testing.T, b Backend) {
	a := MustLock(t, mutex(t, b.Session(t), "mm/a"))
	both := LockAsync(Ctx(t), multi(t, b.Session(t), "mm/a", "mm/b"))
	b.WaitEntries(t, "mm/b", 1)
	// A Mutex of b that comes after the multi-lock queues behind it,
	// although b itself is free.
	bl := LockAsync(Ctx(t), mutex(t, b.Session(t), "mm/b"))
	b.WaitEntries(t, "mm/b", 2)
	notYet(t, "the multi-lock and the Mutex behind it", both, bl)
	MustUnlock(t, a)
	l := after(t, both, a.Token(), "the multi-lock")
	notYet(t, "the Mutex of b while the multi-lock holds", bl)
	MustUnlock(t, l)
	MustUnlock(t, after(t, bl, l.Token(), "the Mutex of b"))
	wantEntriesEach(t, b, 0, "after all released", "mm/a", "mm/b")
}

func multiInvalidNames(t *testing.T, b Backend) {
	s := b.Session(t)
	many := make([]string, distlock.MaxMultiNames+1)
	for i := range many {
		many[i] = fmt.Sprintf("n%d", i)
	}
	for _, names := range [][]string{nil, {"a", "a"}, {"a", ""}, {"a", "b/"}, many} {
		if _, err := s.MultiMutex(names...); !errors.Is(err, distlock.ErrInvalidName) {
			t.Errorf("MultiMutex(%q): %v, want ErrInvalidName", names, err)
		}
	}
	l := MustLock(t, multi(t, s, many[:distlock.MaxMultiNames]...))
	if len(l.Tokens()) != distlock.MaxMultiNames {
		t.Fatalf("%d tokens, want %d", len(l.Tokens()), distlock.MaxMultiNames)
	}
	MustUnlock(t, l)
	wantEntriesEach(t, b, 0, "after the largest multi-lock", many[:distlock.MaxMultiNames]...)
}

// multiFence fences two resources, one per name, with a multi-lock's
// tokens: a write with every token fresh is admitted, and once a later
// Mutex of one name has written, the old multi-lock's tokens are refused
// as a whole, the other resource's fence unchanged.
func multiFence(t *testing.T, b Backend) {
	s := b.Session(t)
	fa, err := fencing.NewMemory("mf/a")
	if err != nil {
		t.Fatal(err)
	}
	fb, err := fencing.NewMemory("mf/b")
	if err != nil {
		t.Fatal(err)
	}
	fences := []*fencing.Memory{fa, fb}
	old := MustLock(t, multi(t, s, "mf/b", "mf/a"))
	wrote := 0
	write := func(context.Context) error { wrote++; return nil }
	if err := fencing.DoAll(Ctx(t), old.Tokens(), fences, write); err != nil || wrote != 1 {
		t.Fatalf("DoAll with fresh tokens: %v (wrote %d)", err, wrote)
	}
	// The holder pauses past its lease: its entries go (here: released),
	// and a Mutex of one name writes with a newer token.
	MustUnlock(t, old)
	newer := MustLock(t, mutex(t, b.Session(t), "mf/b"))
	if err := fb.Do(Ctx(t), newer.Token(), write); err != nil {
		t.Fatal(err)
	}
	MustUnlock(t, newer)
	err = fencing.DoAll(Ctx(t), old.Tokens(), fences, write)
	if !errors.Is(err, fencing.ErrStale) || wrote != 2 {
		t.Fatalf("DoAll with one name's stale token: %v (wrote %d), want ErrStale and no write", err, wrote)
	}
	if got := fa.Newest(); got != old.Tokens()[0] {
		t.Fatalf("fence of mf/a holds %v after a refused write, want %v unchanged", got, old.Tokens()[0])
	}
}
