package locktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
)

// Semaphore is a backend's semaphore (recipe.Semaphore,
// recipe.Semaphore).
type Semaphore interface {
	// Acquire waits for a permit, as the store's Semaphore.Acquire.
	Acquire(ctx context.Context) (*distlock.Permit, error)
	// TryAcquire takes a permit only if one is free and nobody waits.
	TryAcquire(ctx context.Context) (*distlock.Permit, error)
	// Permits returns the semaphore's permit count.
	Permits() int
}

var semaphoreCases = []struct {
	name string
	run  func(t *testing.T, b Backend)
}{
	{"SemaphoreAtMostN", semAtMostN},
	{"SemaphoreFIFO", semFIFO},
	{"SemaphoreCancelAtEveryPosition", semCancelEveryPosition},
	{"SemaphoreHolderSessionEnds", semHolderSessionEnds},
	{"SemaphoreWaiterSessionEnds", semWaiterSessionEnds},
	{"SemaphoreTryAcquireExactlyN", semTryExactlyN},
	{"SemaphorePermitsMismatch", semMismatch},
	{"SemaphoreFencedSlots", semFencedSlots},
	{"SemaphoreBadInput", semBadInput},
	{"SemaphoreSameSession", semSameSession},
	{"SemaphoreStaleRelease", semStaleRelease},
	{"SemaphoreAndMutex", semAndMutex},
}

// semAndMutex: a semaphore, a mutex and an election of the same name are
// separate queues: each is taken at once while the others are held.
func semAndMutex(t *testing.T, b Backend) {
	s := b.Session(t)
	l := MustLock(t, mutex(t, s, "both"))
	ld := MustCampaign(t, election(t, s, "both"), "leader")
	ctx, cancel := context.WithTimeout(Ctx(t), Timeout)
	defer cancel()
	p, err := semaphore(t, b.Session(t), "both", 1).TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire beside a held mutex and a leader of the same name: %v", err)
	}
	if _, err := mutex(t, b.Session(t), "both").TryLock(ctx); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock of the held mutex beside a permit: %v, want ErrLocked", err)
	}
	if _, err := semaphore(t, b.Session(t), "both", 1).TryAcquire(ctx); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryAcquire of the full semaphore: %v, want ErrLocked", err)
	}
	MustRelease(t, p)
	MustResign(t, ld)
	MustUnlock(t, l)
	wantSemEmpty(t, b, "both", "after all released")
	wantEntries(t, b, "both", 0, "after all released")
}

// semStaleRelease: a holder whose session ended, and whose slot a waiter
// then took, releases late. Slot keys and znodes have the same name for
// every holder of a slot, so the late release must not delete the
// successor's (the ZooKeeper client has even started a new session by
// then, which deletes like any other).
func semStaleRelease(t *testing.T, b Backend) {
	sa := b.Session(t)
	a := MustAcquire(t, semaphore(t, sa, "stale", 1))
	w := AcquireAsync(Ctx(t), semaphore(t, b.Session(t), "stale", 1))
	b.WaitLine(t, "stale", 1)
	sa.End(t)
	p := granted(t, w, "the waiter")
	if p.Slot() != a.Slot() {
		t.Fatalf("waiter got slot %d, want %d", p.Slot(), a.Slot())
	}
	if err := a.Release(Ctx(t)); !errors.Is(err, distlock.ErrLost) {
		t.Fatalf("the ended holder's late Release: %v, want ErrLost", err)
	}
	if _, slots := b.SemaphoreEntries(t, "stale"); len(slots) != 1 {
		t.Fatalf("slots %v after the late release, want the successor's", slots)
	}
	select {
	case <-p.Done():
		t.Fatalf("the successor's permit ended after the late release: %v", p.Err())
	default:
	}
	if _, err := semaphore(t, b.Session(t), "stale", 1).TryAcquire(Ctx(t)); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryAcquire while the successor holds: %v, want ErrLocked", err)
	}
	MustRelease(t, p)
	wantSemEmpty(t, b, "stale", "after all released")
}

// semSameSession takes every permit from one session, concurrently: each
// Acquire gets a slot of its own, one more waits, and a release lets it in
// with the freed slot.
func semSameSession(t *testing.T, b Backend) {
	const n = 3
	s := semaphore(t, b.Session(t), "same", n)
	res := make([]<-chan PermitResult, n)
	for i := range res {
		res[i] = AcquireAsync(Ctx(t), s)
	}
	held := map[int]*distlock.Permit{}
	for i := range res {
		p := granted(t, res[i], fmt.Sprintf("acquisition %d", i))
		if held[p.Slot()] != nil {
			t.Fatalf("slot %d granted twice in one session", p.Slot())
		}
		held[p.Slot()] = p
	}
	w := AcquireAsync(Ctx(t), s)
	b.WaitLine(t, "same", 1)
	notGranted(t, "a fourth Acquire", w)
	MustRelease(t, held[1])
	p := granted(t, w, "the fourth Acquire")
	if p.Slot() != 1 {
		t.Fatalf("the fourth got slot %d, want the freed 1", p.Slot())
	}
	held[1] = p
	for _, p := range held {
		MustRelease(t, p)
	}
	wantSemEmpty(t, b, "same", "after all released")
}

func semaphore(t *testing.T, s Session, name string, n int) Semaphore {
	t.Helper()
	m, err := s.Semaphore(name, n)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// PermitResult is what an Acquire running in the background returned.
type PermitResult struct {
	Permit *distlock.Permit
	Err    error
}

// AcquireAsync runs s.Acquire(ctx) in a goroutine.
func AcquireAsync(ctx context.Context, s Semaphore) <-chan PermitResult {
	ch := make(chan PermitResult, 1)
	go func() {
		p, err := s.Acquire(ctx)
		ch <- PermitResult{p, err}
	}()
	return ch
}

// MustAcquire acquires a permit of s or fails the test.
func MustAcquire(t *testing.T, s Semaphore) *distlock.Permit {
	t.Helper()
	p, err := s.Acquire(Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// MustRelease releases p or fails the test.
func MustRelease(t *testing.T, p *distlock.Permit) {
	t.Helper()
	if err := p.Release(Ctx(t)); err != nil {
		t.Fatal(err)
	}
}

func granted(t *testing.T, ch <-chan PermitResult, what string) *distlock.Permit {
	t.Helper()
	r := Recv(t, ch, what)
	if r.Err != nil {
		t.Fatalf("%s: %v", what, r.Err)
	}
	return r.Permit
}

func notGranted(t *testing.T, what string, chs ...<-chan PermitResult) {
	t.Helper()
	for _, ch := range chs {
		select {
		case r := <-ch:
			t.Fatalf("%s returned (err %v) while no permit is free", what, r.Err)
		default:
		}
	}
}

func wantSemEmpty(t *testing.T, b Backend, name, why string) {
	t.Helper()
	if line, slots := b.SemaphoreEntries(t, name); len(line)+len(slots) != 0 {
		t.Fatalf("%s: line %v, slots %v left behind", why, line, slots)
	}
}

// semAtMostN runs many acquisitions on several sessions at once and
// counts the holders inside the critical section with an atomic counter:
// never more than N, and N reached. Slots are unique among holders.
func semAtMostN(t *testing.T, b Backend) {
	const n, workers, rounds = 3, 8, 4
	var (
		in, peak atomic.Int32
		mu       sync.Mutex
		slots    = map[int]bool{}
		wg       sync.WaitGroup
	)
	sems := make([]Semaphore, workers)
	for i := range sems {
		sems[i] = semaphore(t, b.Session(t), "atmost", n)
	}
	for _, s := range sems {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				p, err := s.Acquire(Ctx(t))
				if err != nil {
					t.Error(err)
					return
				}
				c := in.Add(1)
				for {
					m := peak.Load()
					if c <= m || peak.CompareAndSwap(m, c) {
						break
					}
				}
				mu.Lock()
				if slots[p.Slot()] {
					t.Errorf("slot %d held twice", p.Slot())
				}
				slots[p.Slot()] = true
				mu.Unlock()
				if p.Slot() < 0 || p.Slot() >= n || p.Token().Name != distlock.SlotName("atmost", p.Slot()) {
					t.Errorf("permit slot %d, token %v", p.Slot(), p.Token())
				}
				if c > n {
					t.Errorf("%d holders at once, want at most %d", c, n)
				}
				mu.Lock()
				delete(slots, p.Slot())
				mu.Unlock()
				in.Add(-1)
				if err := p.Release(Ctx(t)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > n {
		t.Fatalf("peak %d holders", p)
	}
	wantSemEmpty(t, b, "atmost", "after all released")
}

// semFIFO fills the semaphore, queues waiters one by one, then releases
// the holders in a random order: the waiters get permits in the order
// they came, one per release, and a waiter never gets one while an
// earlier waiter waits.
func semFIFO(t *testing.T, b Backend) {
	const n, waiters = 2, 5
	held := []*distlock.Permit{
		MustAcquire(t, semaphore(t, b.Session(t), "fifo", n)),
		MustAcquire(t, semaphore(t, b.Session(t), "fifo", n)),
	}
	res := make([]<-chan PermitResult, waiters)
	for i := range res {
		res[i] = AcquireAsync(Ctx(t), semaphore(t, b.Session(t), "fifo", n))
		b.WaitLine(t, "fifo", i+1)
	}
	notGranted(t, "a waiter", res...)
	for i := range waiters {
		// Release a random holder: the next waiter, and only it, gets in.
		j := rand.IntN(len(held))
		MustRelease(t, held[j])
		held = append(held[:j], held[j+1:]...)
		p := granted(t, res[i], fmt.Sprintf("waiter %d", i))
		notGranted(t, fmt.Sprintf("a waiter behind %d", i), res[i+1:]...)
		held = append(held, p)
	}
	for _, p := range held {
		MustRelease(t, p)
	}
	wantSemEmpty(t, b, "fifo", "after all released")
}

// semCancelEveryPosition cancels a waiter at each position of the line
// (head, middle, tail): the others still get their permits in order, and
// nothing is left behind.
func semCancelEveryPosition(t *testing.T, b Backend) {
	const waiters = 4
	for pos := range waiters {
		t.Run(fmt.Sprintf("position%d", pos), func(t *testing.T) {
			name := fmt.Sprintf("cancel%d", pos)
			holder := MustAcquire(t, semaphore(t, b.Session(t), name, 1))
			res := make([]<-chan PermitResult, waiters)
			var cancel context.CancelFunc
			for i := range res {
				ctx := Ctx(t)
				if i == pos {
					ctx, cancel = context.WithCancel(ctx)
				}
				res[i] = AcquireAsync(ctx, semaphore(t, b.Session(t), name, 1))
				b.WaitLine(t, name, i+1)
			}
			cancel()
			if r := Recv(t, res[pos], "the cancelled waiter"); !errors.Is(r.Err, context.Canceled) {
				t.Fatalf("cancelled waiter: %v, want context.Canceled", r.Err)
			}
			MustRelease(t, holder)
			for i := range res {
				if i == pos {
					continue
				}
				p := granted(t, res[i], fmt.Sprintf("waiter %d", i))
				MustRelease(t, p)
			}
			wantSemEmpty(t, b, name, "after all released")
		})
	}
}

// semHolderSessionEnds ends a holder's session: its permit is lost, and
// the waiter gets the freed slot with a newer token.
func semHolderSessionEnds(t *testing.T, b Backend) {
	sa, sb := b.Session(t), b.Session(t)
	a := MustAcquire(t, semaphore(t, sa, "hexp", 2))
	bp := MustAcquire(t, semaphore(t, sb, "hexp", 2))
	w := AcquireAsync(Ctx(t), semaphore(t, b.Session(t), "hexp", 2))
	b.WaitLine(t, "hexp", 1)
	sa.End(t)
	Recv(t, a.Done(), "the ended holder's Done")
	if !errors.Is(a.Err(), distlock.ErrLost) {
		t.Fatalf("ended holder's Err %v, want ErrLost", a.Err())
	}
	p := granted(t, w, "the waiter")
	if p.Slot() != a.Slot() || !p.Token().Newer(a.Token()) {
		t.Fatalf("waiter got slot %d token %v; want slot %d with a token newer than %v", p.Slot(), p.Token(), a.Slot(), a.Token())
	}
	MustRelease(t, p)
	MustRelease(t, bp)
	wantSemEmpty(t, b, "hexp", "after all released")
}

// semWaiterSessionEnds ends the head waiter's session: its Acquire fails,
// and the waiter behind it takes its place.
func semWaiterSessionEnds(t *testing.T, b Backend) {
	holder := MustAcquire(t, semaphore(t, b.Session(t), "wexp", 1))
	sw := b.Session(t)
	w1 := AcquireAsync(Ctx(t), semaphore(t, sw, "wexp", 1))
	b.WaitLine(t, "wexp", 1)
	w2 := AcquireAsync(Ctx(t), semaphore(t, b.Session(t), "wexp", 1))
	b.WaitLine(t, "wexp", 2)
	sw.End(t)
	if r := Recv(t, w1, "the ended waiter"); r.Err == nil {
		t.Fatal("the ended waiter acquired")
	}
	MustRelease(t, holder)
	MustRelease(t, granted(t, w2, "the waiter behind"))
	wantSemEmpty(t, b, "wexp", "after all released")
}

// semTryExactlyN races more TryAcquires than permits: exactly N win.
func semTryExactlyN(t *testing.T, b Backend) {
	const n, tries = 3, 8
	sems := make([]Semaphore, tries)
	for i := range sems {
		sems[i] = semaphore(t, b.Session(t), "try", n)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		won    []*distlock.Permit
		locked int
	)
	start := make(chan struct{})
	for _, s := range sems {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			p, err := s.TryAcquire(Ctx(t))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, p)
			case errors.Is(err, distlock.ErrLocked):
				locked++
			default:
				t.Errorf("TryAcquire: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(won) != n || locked != tries-n {
		t.Fatalf("%d winners, %d ErrLocked; want %d and %d", len(won), locked, n, tries-n)
	}
	if line, slots := b.SemaphoreEntries(t, "try"); len(line) != 0 || len(slots) != n {
		t.Fatalf("line %v, slots %v; want no line and %d slots", line, slots, n)
	}
	for _, p := range won {
		MustRelease(t, p)
	}
	p, err := sems[0].TryAcquire(Ctx(t))
	if err != nil {
		t.Fatalf("TryAcquire after release: %v", err)
	}
	MustRelease(t, p)
	wantSemEmpty(t, b, "try", "after all released")
}

// semMismatch: a semaphore used with N=2 refuses an Acquire and a
// TryAcquire made with N=3, leaving nothing of theirs behind; once it is
// idle, N=3 is accepted.
func semMismatch(t *testing.T, b Backend) {
	p := MustAcquire(t, semaphore(t, b.Session(t), "mis", 2))
	other := semaphore(t, b.Session(t), "mis", 3)
	if _, err := other.Acquire(Ctx(t)); !errors.Is(err, distlock.ErrPermitsMismatch) {
		t.Fatalf("Acquire with another N: %v, want ErrPermitsMismatch", err)
	}
	if _, err := other.TryAcquire(Ctx(t)); !errors.Is(err, distlock.ErrPermitsMismatch) {
		t.Fatalf("TryAcquire with another N: %v, want ErrPermitsMismatch", err)
	}
	if line, slots := b.SemaphoreEntries(t, "mis"); len(line) != 0 || len(slots) != 1 {
		t.Fatalf("line %v, slots %v; want the one holder's slot only", line, slots)
	}
	MustRelease(t, p)
	MustRelease(t, MustAcquire(t, other))
	wantSemEmpty(t, b, "mis", "after all released")
}

// semFencedSlots: each slot's successive holders have growing tokens
// named after the slot, so a fence per slot refuses a permit's late write
// once the slot's next holder wrote, and refuses another slot's permit.
func semFencedSlots(t *testing.T, b Backend) {
	s := semaphore(t, b.Session(t), "fenced", 2)
	var fences []*fencing.Memory
	for i := range 2 {
		f, err := fencing.NewMemory(distlock.SlotName("fenced", i))
		if err != nil {
			t.Fatal(err)
		}
		fences = append(fences, f)
	}
	released := map[int]distlock.Token{}
	for round := range 3 {
		held := []*distlock.Permit{MustAcquire(t, s), MustAcquire(t, s)}
		for _, p := range held {
			k := p.Slot()
			if p.Deadline().IsZero() {
				t.Fatal("a held permit has no Deadline")
			}
			if prev, ok := released[k]; ok && !p.Token().Newer(prev) {
				t.Fatalf("slot %d: token %v not newer than its previous holder's %v", k, p.Token(), prev)
			}
			if err := fences[k].Admit(Ctx(t), p.Token()); err != nil {
				t.Fatalf("round %d: the fence of slot %d refused its holder: %v", round, k, err)
			}
			if err := fences[1-k].Admit(Ctx(t), p.Token()); err == nil {
				t.Fatalf("the fence of slot %d admitted a permit of slot %d", 1-k, k)
			}
			if prev, ok := released[k]; ok {
				if err := fences[k].Admit(Ctx(t), prev); !errors.Is(err, fencing.ErrStale) {
					t.Fatalf("slot %d: a released permit's late write: %v, want ErrStale", k, err)
				}
			}
		}
		for _, p := range held {
			released[p.Slot()] = p.Token()
			MustRelease(t, p)
		}
	}
	wantSemEmpty(t, b, "fenced", "after all released")
}

// semBadInput: permit counts out of range and bad names are refused;
// a double release says so.
func semBadInput(t *testing.T, b Backend) {
	s := b.Session(t)
	for _, n := range []int{0, -1, distlock.MaxPermits + 1} {
		if _, err := s.Semaphore("bad", n); !errors.Is(err, distlock.ErrInvalidPermits) {
			t.Errorf("N=%d: %v, want ErrInvalidPermits", n, err)
		}
	}
	if _, err := s.Semaphore("a//b", 2); !errors.Is(err, distlock.ErrInvalidName) {
		t.Errorf("bad name: %v, want ErrInvalidName", err)
	}
	p := MustAcquire(t, semaphore(t, s, "double", 2))
	MustRelease(t, p)
	if err := p.Release(Ctx(t)); !errors.Is(err, distlock.ErrReleased) {
		t.Fatalf("second Release: %v, want ErrReleased", err)
	}
}
