package locktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/distlock/distlock"
)

// RWLocker is a backend's readers-writer lock: Lock and TryLock take it
// for writing, RLock and TryRLock for reading.
type RWLocker interface {
	distlock.Locker
	// RLock takes a read lock, as the store's RWMutex.RLock.
	RLock(ctx context.Context) (*distlock.Lease, error)
	// TryRLock takes a read lock only if no writer holds or waits, as
	// the store's RWMutex.TryRLock.
	TryRLock(ctx context.Context) (*distlock.Lease, error)
}

// rwCases are the readers-writer lock's part of the contract.
var rwCases = []struct {
	name string
	run  func(t *testing.T, b Backend)
}{
	{"RWManyReadersOneWriter", rwManyReaders},
	{"RWFIFOAcrossKinds", rwFIFO},
	{"RWWriterNotStarved", rwWriterNotStarved},
	{"RWCancelAtEveryPosition", rwCancel},
	{"RWTry", rwTry},
}

func rwmutex(t *testing.T, s Session, name string) RWLocker {
	t.Helper()
	m, err := s.RWMutex(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// MustRLock read-locks m or fails the test.
func MustRLock(t *testing.T, m RWLocker) *distlock.Lease {
	t.Helper()
	l, err := m.RLock(Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// RLockAsync runs m.RLock(ctx) in a goroutine.
func RLockAsync(ctx context.Context, m RWLocker) <-chan Result {
	ch := make(chan Result, 1)
	go func() {
		l, err := m.RLock(ctx)
		ch <- Result{l, err}
	}()
	return ch
}

// acquired waits for a background Lock or RLock and fails the test unless
// it acquired.
func acquired(t *testing.T, res <-chan Result, what string) *distlock.Lease {
	t.Helper()
	r := Recv(t, res, what)
	if r.Err != nil {
		t.Fatalf("%s: %v", what, r.Err)
	}
	return r.Lease
}

func wantLocked(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("%s: %v, want ErrLocked", what, err)
	}
}

// rwManyReaders: readers hold together; a writer waits for every one of
// them and then excludes readers and writers alike; its token exceeds
// every earlier reader's.
func rwManyReaders(t *testing.T, b Backend) {
	const n = 5
	var readers []*distlock.Lease
	for i := range n {
		m := rwmutex(t, b.Session(t), "rw")
		if rl, ok := m.(interface{ RLocker() distlock.Locker }); ok && i%2 == 1 {
			// A backend's RLocker, where it has one, is the same reader.
			readers = append(readers, MustLock(t, rl.RLocker()))
			continue
		}
		readers = append(readers, MustRLock(t, m))
	}
	wantEntries(t, b, "rw", n, "readers holding together")

	w := LockAsync(Ctx(t), rwmutex(t, b.Session(t), "rw"))
	b.WaitEntries(t, "rw", n+1)
	for i, r := range readers {
		notYet(t, fmt.Sprintf("the writer, with %d readers holding", n-i), w)
		MustUnlock(t, r)
	}
	wl := acquired(t, w, "writer")
	for i, r := range readers {
		if !wl.Token().Newer(r.Token()) {
			t.Fatalf("writer's token %v not newer than reader %d's %v", wl.Token(), i, r.Token())
		}
	}

	// The writer excludes everyone.
	rs := b.Session(t)
	r2 := RLockAsync(Ctx(t), rwmutex(t, rs, "rw"))
	b.WaitEntries(t, "rw", 2)
	w2 := LockAsync(Ctx(t), rwmutex(t, b.Session(t), "rw"))
	b.WaitEntries(t, "rw", 3)
	notYet(t, "a reader or writer behind the writer", r2, w2)
	MustUnlock(t, wl)
	rl := acquired(t, r2, "reader after the writer")
	if !rl.Token().Newer(wl.Token()) {
		t.Fatalf("reader's token %v not newer than the writer's %v", rl.Token(), wl.Token())
	}
	notYet(t, "the second writer, with a reader holding", w2)
	MustUnlock(t, rl)
	MustUnlock(t, Successor(t, w2, rl.Token(), "second writer"))
	wantEntries(t, b, "rw", 0, "after all released")
}

// rwEntry is one acquisition in a scripted queue.
type rwEntry struct {
	kind  distlock.Kind
	res   <-chan Result
	lease *distlock.Lease
}

func (e *rwEntry) String() string { return e.kind.String() }

// enqueue starts the acquisitions of kinds ('r' a reader, 'w' a writer),
// in order, each on its own session of sessions and each only once the one
// before it is queued; ctx gives each one's context. The first one must
// acquire at once.
func enqueue(t *testing.T, b Backend, sessions []Session, name, kinds string, ctx func(i int) context.Context) []*rwEntry {
	t.Helper()
	var q []*rwEntry
	for i, c := range kinds {
		m := rwmutex(t, sessions[i], name)
		e := &rwEntry{kind: distlock.Exclusive}
		if c == 'r' {
			e.kind = distlock.Shared
			e.res = RLockAsync(ctx(i), m)
		} else {
			e.res = LockAsync(ctx(i), m)
		}
		q = append(q, e)
		if i == 0 {
			e.lease = acquired(t, e.res, "the first entry")
		}
		b.WaitEntries(t, name, i+1)
	}
	return q
}

// drain releases q in the order the lock must grant it: at each step the
// entries that hold are the front writer alone, or every reader before the
// first writer. It checks that exactly those acquired, that each
// acquisition's token is newer than every earlier one's, and that nothing
// is left at the end.
func drain(t *testing.T, b Backend, name string, q []*rwEntry) {
	t.Helper()
	var last distlock.Token
	for step := 0; len(q) > 0; step++ {
		n := 1
		if q[0].kind == distlock.Shared {
			for n < len(q) && q[n].kind == distlock.Shared {
				n++
			}
		}
		for i, e := range q[:n] {
			if e.lease == nil {
				e.lease = acquired(t, e.res, fmt.Sprintf("step %d: %s %d of the front group", step, e, i))
			}
			if tok := e.lease.Token(); last.Seq != 0 && !tok.Newer(last) {
				t.Fatalf("step %d: %s %d's token %v not newer than %v", step, e, i, tok, last)
			}
			last = e.lease.Token()
		}
		for _, e := range q[n:] {
			if e.lease != nil {
				t.Fatalf("step %d: a %s behind the front group holds", step, e)
			}
			notYet(t, fmt.Sprintf("step %d: a %s behind the front group", step, e), e.res)
		}
		for _, e := range q[:n] {
			MustUnlock(t, e.lease)
		}
		q = q[n:]
	}
	wantEntries(t, b, name, 0, "after all released")
}

// rwFIFO: a reader that arrives while a writer waits queues behind the
// writer even though only readers hold; every group acquires in the order
// it queued.
func rwFIFO(t *testing.T, b Backend) {
	const kinds = "rwrwrrw"
	var sessions []Session
	for range kinds {
		sessions = append(sessions, b.Session(t))
	}
	q := enqueue(t, b, sessions, "fifo-rw", kinds, func(int) context.Context { return Ctx(t) })
	drain(t, b, "fifo-rw", q)
}

// rwWriterNotStarved: readers keep coming and going while a writer waits,
// so that some reader always holds; the writer still acquires as soon as
// the readers that were ahead of it are gone, before every reader that
// came after it.
func rwWriterNotStarved(t *testing.T, b Backend) {
	const name = "starve"
	ahead := []*distlock.Lease{
		MustRLock(t, rwmutex(t, b.Session(t), name)),
		MustRLock(t, rwmutex(t, b.Session(t), name)),
	}
	w := LockAsync(Ctx(t), rwmutex(t, b.Session(t), name))
	b.WaitEntries(t, name, 3)
	var behind []<-chan Result
	for i, l := range ahead {
		// A new reader arrives while an older one still holds: it would
		// share with it, but the writer is ahead.
		behind = append(behind, RLockAsync(Ctx(t), rwmutex(t, b.Session(t), name)))
		b.WaitEntries(t, name, 4)
		notYet(t, "the writer", w)
		notYet(t, "a reader that came after the writer", behind...)
		MustUnlock(t, l)
		if i == 0 {
			notYet(t, "the writer, with one reader ahead still holding", w)
		}
	}
	wl := acquired(t, w, "the writer")
	for _, l := range ahead {
		if !wl.Token().Newer(l.Token()) {
			t.Fatalf("writer's token %v not newer than a reader's %v", wl.Token(), l.Token())
		}
	}
	// A TryRLock does not pass the writer either.
	_, err := rwmutex(t, b.Session(t), name).TryRLock(Ctx(t))
	wantLocked(t, err, "TryRLock while a writer holds")
	notYet(t, "a reader that came after the writer", behind...)
	MustUnlock(t, wl)
	var later []*distlock.Lease
	for i, r := range behind {
		later = append(later, Successor(t, r, wl.Token(), fmt.Sprintf("reader %d behind the writer", i)))
	}
	for _, l := range later {
		MustUnlock(t, l)
	}
	wantEntries(t, b, name, 0, "after all released")
}

// rwCancel: a waiter cancelled at any position — reader or writer, at the
// front, in the middle, at the back, behind a reader or a writer — leaves
// nothing behind, and the others acquire in FIFO order as if it had never
// queued.
func rwCancel(t *testing.T, b Backend) {
	for _, kinds := range []string{"rwrrwrw", "wrwr"} {
		// One session per position, shared by the sub-cases (each on a
		// lock of its own).
		var sessions []Session
		for range kinds {
			sessions = append(sessions, b.Session(t))
		}
		for c := 1; c < len(kinds); c++ {
			name := fmt.Sprintf("cancel-%s-%d", kinds, c)
			t.Run(fmt.Sprintf("%s/%d", kinds, c), func(t *testing.T) {
				ctx, cancel := context.WithCancel(Ctx(t))
				defer cancel()
				q := enqueue(t, b, sessions, name, kinds, func(i int) context.Context {
					if i == c {
						return ctx
					}
					return Ctx(t)
				})
				cancelled := q[c].res
				q = append(q[:c], q[c+1:]...)
				cancel()
				if r := Recv(t, cancelled, "the cancelled waiter"); !errors.Is(r.Err, context.Canceled) {
					if r.Err == nil {
						r.Lease.Unlock(Ctx(t))
					}
					t.Fatalf("cancelled %c at %d: %v, want context.Canceled", kinds[c], c, r.Err)
				}
				if e := b.Entries(t, name); len(e) != len(kinds)-1 {
					t.Fatalf("after cancelling %c at %d: entries %s, want %d", kinds[c], c, strings.Join(e, " "), len(kinds)-1)
				}
				drain(t, b, name, q)
			})
		}
	}
}

// rwTry: TryRLock succeeds while only readers hold and fails, writing
// nothing, while a writer holds or waits; TryLock fails while anyone holds.
func rwTry(t *testing.T, b Backend) {
	const name = "try-rw"
	m := rwmutex(t, b.Session(t), name)
	r1, err := m.TryRLock(Ctx(t))
	if err != nil {
		t.Fatalf("TryRLock on a free lock: %v", err)
	}
	r2, err := rwmutex(t, b.Session(t), name).TryRLock(Ctx(t))
	if err != nil {
		t.Fatalf("TryRLock while a reader holds: %v", err)
	}
	_, err = m.TryLock(Ctx(t))
	wantLocked(t, err, "TryLock while readers hold")
	var le *distlock.LockError
	if !errors.As(err, &le) || le.Name != name || le.Op != "trylock" {
		t.Fatalf("TryLock error %v: want a *LockError for lock %q", err, name)
	}
	wantEntries(t, b, name, 2, "a losing TryLock left an entry")

	// The writer, and every try expected to win after a release, use m's
	// session: on ZooKeeper a try may lose to a release another session
	// made that the try's server has not applied yet (see zklock's
	// TryLock); its own session's requests it sees in order.
	w := LockAsync(Ctx(t), m)
	b.WaitEntries(t, name, 3)
	_, err = m.TryRLock(Ctx(t))
	wantLocked(t, err, "TryRLock while a writer waits")
	wantEntries(t, b, name, 3, "a losing TryRLock left an entry")
	MustUnlock(t, r1)
	MustUnlock(t, r2)
	wl := acquired(t, w, "writer")
	_, err = m.TryRLock(Ctx(t))
	wantLocked(t, err, "TryRLock while a writer holds")
	_, err = m.TryLock(Ctx(t))
	wantLocked(t, err, "TryLock while a writer holds")
	wantEntries(t, b, name, 1, "losing tries left entries")
	MustUnlock(t, wl)

	r3, err := m.TryRLock(Ctx(t))
	if err != nil {
		t.Fatalf("TryRLock after the writer released: %v", err)
	}
	if !r3.Token().Newer(wl.Token()) {
		t.Fatalf("reader's token %v not newer than the writer's %v", r3.Token(), wl.Token())
	}
	MustUnlock(t, r3)
	wl2, err := m.TryLock(Ctx(t))
	if err != nil {
		t.Fatalf("TryLock on a free lock: %v", err)
	}
	MustUnlock(t, wl2)
	wantEntries(t, b, name, 0, "after all released")
}
