package qlock_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/distlock/distlock/internal/qlock"
)

// TestSemaphoreModel checks the semaphore's scheme (semaphore.go) against
// the pure rules of a fair counting semaphore, over random runs: holders
// release in random order, waiters give up at random positions,
// newcomers arrive at random times, and the store's notifications are
// delivered late and out of order. The line waiters' views are the
// engine's own qlock.Queue; the slots and the claims follow the drivers'
// rules (lowest free slot; a direct claim only while the line is empty;
// the head alone watches the slots).
//
// The rules: never more than N holders, one per slot; permits granted in
// arrival order among those that did not give up; whenever nothing is
// left to deliver, no permit is free while someone waits (no lost
// wake-up); and no herd: a release wakes at most one waiter (the head),
// and a claim's delete of its line entry wakes at most one (the next in
// line).
func TestSemaphoreModel(t *testing.T) {
	for seed := range uint64(300) {
		n := 1 + int(seed%5)
		t.Run(fmt.Sprintf("seed%d-n%d", seed, n), func(t *testing.T) {
			m := newSemModel(t, n, rand.New(rand.NewPCG(seed, 42)))
			m.run(400)
		})
	}
}

type semWaiter struct {
	id       int
	entry    qlock.Entry
	q        *qlock.Queue
	watching string // the line entry it waits on; "" when it is the head
	head     bool   // watching the slots
}

type semEvent struct {
	w    *semWaiter
	gone qlock.Entry // a line entry deleted; zero Key: a slot freed
}

type semModel struct {
	t        *testing.T
	n        int
	rng      *rand.Rand
	seq      int64
	slots    []int        // holder id per slot, -1 if free
	line     []*semWaiter // oldest first
	pending  []semEvent   // notifications not yet delivered
	arrivals []int        // ids, in arrival order
	granted  []int        // ids, in grant order
	gaveUp   map[int]bool
	nextID   int
}

func newSemModel(t *testing.T, n int, rng *rand.Rand) *semModel {
	m := &semModel{t: t, n: n, rng: rng, slots: make([]int, n), gaveUp: map[int]bool{}}
	for i := range m.slots {
		m.slots[i] = -1
	}
	return m
}

func (m *semModel) free() int { return slices.Index(m.slots, -1) }

func (m *semModel) holders() int { return m.n - countOf(m.slots, -1) }

func countOf(s []int, v int) int {
	c := 0
	for _, x := range s {
		if x == v {
			c++
		}
	}
	return c
}

func (m *semModel) grant(id int) {
	i := m.free()
	if i < 0 {
		m.t.Fatalf("granted %d with no free slot", id)
	}
	m.slots[i] = id
	m.granted = append(m.granted, id)
	if h := m.holders(); h > m.n {
		m.t.Fatalf("%d holders, N=%d", h, m.n)
	}
}

// arrive is Acquire: a direct claim when the line is empty and a slot is
// free, else an entry at the end of the line.
func (m *semModel) arrive() {
	id := m.nextID
	m.nextID++
	m.arrivals = append(m.arrivals, id)
	if len(m.line) == 0 && m.free() >= 0 {
		m.grant(id)
		return
	}
	m.seq++
	w := &semWaiter{id: id, entry: qlock.Entry{Key: fmt.Sprint("c", m.seq), Seq: m.seq, Kind: qlock.Counted}}
	all := make([]qlock.Entry, 0, len(m.line)+1)
	for _, o := range m.line {
		all = append(all, o.entry)
	}
	m.line = append(m.line, w)
	w.q = qlock.NewQueue(w.entry, all, false)
	m.advance(w)
}

// advance moves w on from its view: wait on the next entry, or as the
// head claim a slot or watch the slots.
func (m *semModel) advance(w *semWaiter) {
	// As the engine's wait: a view that kept only the newest entries
	// reads the store once the ones it knows are gone.
	for {
		below, must := w.q.MustRead()
		if !must {
			break
		}
		m.survivors(w, below)
	}
	if p, ok := w.q.Next(); ok {
		w.watching = p.Key
		return
	}
	w.watching = ""
	if m.free() < 0 {
		w.head = true
		return
	}
	// The claim: take the slot and delete the line entry in one write.
	w.head = false
	m.grant(w.id)
	m.removeFromLine(w)
}

// removeFromLine deletes w's line entry and notifies whoever watches it.
func (m *semModel) removeFromLine(w *semWaiter) {
	m.line = slices.DeleteFunc(m.line, func(o *semWaiter) bool { return o == w })
	woken := 0
	for _, o := range m.line {
		if o.watching == w.entry.Key {
			m.pending = append(m.pending, semEvent{w: o, gone: w.entry})
			o.watching = "notified"
			woken++
		}
	}
	if woken > 1 {
		m.t.Fatalf("a line entry's delete woke %d waiters", woken)
	}
}

// release frees a random holder's slot; only an armed head hears of it.
func (m *semModel) release() {
	var held []int
	for i, h := range m.slots {
		if h >= 0 {
			held = append(held, i)
		}
	}
	if len(held) == 0 {
		return
	}
	m.slots[held[m.rng.IntN(len(held))]] = -1
	woken := 0
	for _, o := range m.line {
		if o.head {
			o.head = false
			m.pending = append(m.pending, semEvent{w: o})
			woken++
		}
	}
	if woken > 1 {
		m.t.Fatalf("a release woke %d waiters", woken)
	}
}

// giveUp cancels a random waiter at any position of the line.
func (m *semModel) giveUp() {
	if len(m.line) == 0 {
		return
	}
	w := m.line[m.rng.IntN(len(m.line))]
	m.gaveUp[w.id] = true
	m.pending = slices.DeleteFunc(m.pending, func(e semEvent) bool { return e.w == w })
	m.removeFromLine(w)
}

// deliver hands one pending notification (a random one) to its waiter.
func (m *semModel) deliver() {
	i := m.rng.IntN(len(m.pending))
	e := m.pending[i]
	m.pending = slices.Delete(m.pending, i, i+1)
	w := e.w
	if e.gone.Key != "" {
		w.q.Gone(e.gone.Key)
		if _, more := w.q.Next(); more {
			m.survivors(w, e.gone.Seq)
		}
	}
	m.advance(w)
}

// survivors is the driver's Survivors: one read of the line below.
func (m *semModel) survivors(w *semWaiter, below int64) {
	var nearest qlock.Entry
	found := false
	for _, o := range m.line {
		if o.entry.Seq < below && (!found || o.entry.Seq > nearest.Seq) {
			nearest, found = o.entry, true
		}
	}
	w.q.Observed(below, nearest, found)
}

func (m *semModel) run(steps int) {
	for range steps {
		switch r := m.rng.IntN(10); {
		case r < 3:
			m.arrive()
		case r < 5:
			m.release()
		case r < 6:
			m.giveUp()
		case len(m.pending) > 0:
			m.deliver()
		}
		m.check(false)
	}
	for len(m.pending) > 0 {
		m.deliver()
	}
	m.check(true)
	// Drain: release everything, delivering as we go.
	for m.holders() > 0 || len(m.line) > 0 {
		m.release()
		for len(m.pending) > 0 {
			m.deliver()
		}
		m.check(true)
	}
	var want []int
	for _, id := range m.arrivals {
		if !m.gaveUp[id] {
			want = append(want, id)
		}
	}
	if !slices.Equal(m.granted, want) {
		m.t.Fatalf("granted in order %v, want the arrival order %v", m.granted, want)
	}
}

// check applies the rules; quiet says nothing is left to deliver.
func (m *semModel) check(quiet bool) {
	if quiet && len(m.line) > 0 && m.free() >= 0 {
		m.t.Fatalf("a permit is free while %d wait: lost wake-up", len(m.line))
	}
	heads := 0
	for _, o := range m.line {
		if o.head {
			heads++
		}
	}
	if heads > 1 {
		m.t.Fatalf("%d waiters watch the slots", heads)
	}
}
