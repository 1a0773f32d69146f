package qlock_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/distlock/distlock/internal/qlock"
)

const (
	X = qlock.Exclusive
	S = qlock.Shared
	C = qlock.Candidate
	N = qlock.Counted
)

func ent(seq int64, k qlock.Kind) qlock.Entry {
	return qlock.Entry{Key: fmt.Sprintf("k%d", seq), Seq: seq, Kind: k}
}

// queueOf returns entries of the given kinds at positions 1, 2, ...
func queueOf(kinds ...qlock.Kind) []qlock.Entry {
	out := make([]qlock.Entry, len(kinds))
	for i, k := range kinds {
		out[i] = ent(int64(i+1), k)
	}
	return out
}

// waitOn is the entry a waiter of kind me waits on.
func waitOn(me qlock.Kind, ahead []qlock.Entry) (qlock.Entry, bool) {
	return qlock.RuleOf(me).Waits(ahead)
}

func TestKind(t *testing.T) {
	if X.String() != "exclusive" || S.String() != "shared" {
		t.Errorf("Kind strings = %q, %q", X, S)
	}
	tests := []struct {
		me, ahead qlock.Kind
		want      bool
	}{
		{X, X, true}, {X, S, true}, {S, X, true}, {S, S, false},
		{C, C, true}, {C, X, false}, {C, S, false}, {X, C, false}, {S, C, false},
		{N, N, true}, {N, X, false}, {X, N, false}, {N, C, false},
	}
	for _, tt := range tests {
		if got := qlock.Conflicts(tt.me, tt.ahead); got != tt.want {
			t.Errorf("Conflicts(%v, %v) = %v, want %v", tt.me, tt.ahead, got, tt.want)
		}
	}
}

func TestAhead(t *testing.T) {
	e1, e2, e3, e5, e7 := ent(1, X), ent(2, S), ent(3, S), ent(5, X), ent(7, S)
	tests := []struct {
		name string
		me   qlock.Entry
		all  []qlock.Entry
		want []qlock.Entry
	}{
		{"empty", e5, nil, []qlock.Entry{}},
		{"only me", e5, []qlock.Entry{e5}, []qlock.Entry{}},
		{"first", e1, []qlock.Entry{e1, e2, e3}, []qlock.Entry{}},
		{"me included, unsorted", e5, []qlock.Entry{e7, e3, e5, e1, e2}, []qlock.Entry{e1, e2, e3}},
		{"me not included", e5, []qlock.Entry{e3, e1, e7}, []qlock.Entry{e1, e3}},
		{"later entries ignored", e2, []qlock.Entry{e7, e5, e3, e1}, []qlock.Entry{e1}},
		{"last", e7, []qlock.Entry{e5, e3, e2, e1, e7}, []qlock.Entry{e1, e2, e3, e5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.all)
			got := qlock.Ahead(tt.me, tt.all)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Ahead(%v, %v) = %v, want %v", tt.me, tt.all, got, tt.want)
			}
			if !slices.Equal(in, tt.all) {
				t.Errorf("Ahead modified its input: %v, was %v", tt.all, in)
			}
		})
	}
}

func TestWaitOnHolds(t *testing.T) {
	q := queueOf
	tests := []struct {
		name  string
		me    qlock.Kind
		ahead []qlock.Entry
		wait  int64 // Seq of the entry to wait on; 0 = holds
	}{
		{"X alone", X, nil, 0},
		{"X behind X", X, q(X), 1},
		{"X behind S", X, q(S), 1},
		{"X waits on immediate predecessor S", X, q(X, S), 2},
		{"X waits on immediate predecessor X", X, q(S, X), 2},
		{"X behind readers", X, q(S, S, S), 3},
		{"S alone", S, nil, 0},
		{"S behind S", S, q(S), 0},
		{"S behind only readers", S, q(S, S, S), 0},
		{"S behind X", S, q(X), 1},
		{"S waits on nearest X, skipping readers", S, q(X, S, S), 1},
		{"S waits on X between readers", S, q(S, X, S), 2},
		{"S waits on the nearer of two X", S, q(X, X, S), 2},
		{"S waits on last X", S, q(X, S, X, S, S), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := waitOn(tt.me, tt.ahead)
			if tt.wait == 0 {
				if ok {
					t.Errorf("WaitOn = %v, true; want holds", e)
				}
				if e != (qlock.Entry{}) {
					t.Errorf("WaitOn returned non-zero entry %v when holding", e)
				}
			} else if !ok || e.Seq != tt.wait {
				t.Errorf("WaitOn = %v, %v; want entry %d", e, ok, tt.wait)
			}

			// A Queue built from the same entries (and me, and someone
			// behind me) decides the same.
			me := ent(100, tt.me)
			all := append(slices.Clone(tt.ahead), ent(200, X), me)
			qu := qlock.NewQueue(me, all, false)
			if qu.Me() != me {
				t.Errorf("Me() = %v, want %v", qu.Me(), me)
			}
			qe, qok := qu.Next()
			if qe != e || qok != ok {
				t.Errorf("Queue.Next() = %v, %v; want %v, %v", qe, qok, e, ok)
			}
		})
	}
}

func TestQueue(t *testing.T) {
	// Queue: 1X 2S 3S 4X 5S 6S [7S me] 8X
	all := []qlock.Entry{ent(8, X), ent(1, X), ent(2, S), ent(3, S), ent(4, X), ent(5, S), ent(6, S), ent(7, S)}
	me := ent(7, S)
	q := qlock.NewQueue(me, all, false)
	// A reader's view knows the writers ahead of it only.
	if got, want := q.Ahead(), []qlock.Entry{ent(1, X), ent(4, X)}; !slices.Equal(got, want) {
		t.Fatalf("Ahead() = %v, want %v", got, want)
	}

	// Ahead returns a copy.
	cp := q.Ahead()
	cp[0] = ent(99, S)
	cp = cp[:0]
	_ = cp
	if got := q.Ahead(); len(got) != 2 || got[0] != ent(1, X) {
		t.Fatalf("modifying Ahead()'s result changed the queue: %v", got)
	}

	steps := []struct {
		gone string
		wait int64 // 0 = holds
	}{
		{"", 4},
		{"nope", 4}, // unknown key: nothing changes
		{"k8", 4},   // behind me: nothing changes
		{"k5", 4},   // a reader between: still waits on 4
		{"k1", 4},
		{"k4", 0}, // the exclusive ahead goes; only readers ahead (2, 3, 6)
		{"k4", 0}, // again: no-op
		{"k2", 0},
		{"k3", 0},
		{"k6", 0},
	}
	for i, st := range steps {
		if st.gone != "" {
			q.Gone(st.gone)
		}
		e, ok := q.Next()
		if st.wait == 0 {
			if ok {
				t.Fatalf("step %d (Gone %q): Next = %v, want holds", i, st.gone, e)
			}
		} else if !ok || e.Seq != st.wait {
			t.Fatalf("step %d (Gone %q): Next = %v, %v, want %d", i, st.gone, e, ok, st.wait)
		}
	}
	if got := q.Ahead(); len(got) != 0 {
		t.Errorf("Ahead() at end = %v, want empty", got)
	}

	// An exclusive waiter walks its predecessors one by one; it keeps the
	// two nearest, and must read before it can go past them.
	all = []qlock.Entry{ent(1, S), ent(2, S), ent(3, X), ent(4, S), ent(5, X)}
	q = qlock.NewQueue(ent(5, X), all, false)
	for _, want := range []int64{4, 3} {
		e, ok := q.Next()
		if !ok || e.Seq != want {
			t.Fatalf("exclusive Next = %v, %v, want %d", e, ok, want)
		}
		q.Gone(e.Key)
	}
	below, must := q.MustRead()
	if !must || below != 3 {
		t.Fatalf("MustRead = %d, %v; want a read below 3", below, must)
	}
	q.Observed(below, ent(2, S), true) // the nearest older: one the view left out
	if e, ok := q.Next(); !ok || e.Seq != 2 {
		t.Fatalf("Next after the read = %v, %v; want 2", e, ok)
	}
	q.Gone("k2")
	if below, must = q.MustRead(); !must || below != 2 {
		t.Fatalf("MustRead = %d, %v; want a read below 2", below, must)
	}
	q.Observed(below, qlock.Entry{}, false) // 1 is gone too
	if _, must := q.MustRead(); must {
		t.Fatal("MustRead after a read that found nothing older")
	}
	if e, ok := q.Next(); ok {
		t.Fatalf("exclusive Next at end = %v, want holds", e)
	}
}

// TestQueueBounded checks that a view keeps a bounded number of entries
// whatever the queue's length, and what a partial enqueue read (more) and
// a read that covers or does not cover the unknown entries do to it.
func TestQueueBounded(t *testing.T) {
	var all []qlock.Entry
	for i := int64(1); i <= 10000; i++ {
		all = append(all, ent(i, X))
	}
	q := qlock.NewQueue(ent(10001, X), all, false)
	if got := q.Ahead(); len(got) != 2 || got[0].Seq != 9999 || got[1].Seq != 10000 {
		t.Fatalf("Ahead() = %v, want the two nearest", got)
	}
	// A read below something newer than the unknown entries that finds
	// one of the known ones present leaves them unknown.
	q.Observed(10001, ent(10000, X), true)
	if got := q.Ahead(); len(got) != 2 {
		t.Fatalf("Ahead() after a read that found the nearest = %v", got)
	}
	// A partial read (the enqueue saw the newest only, and more).
	p := qlock.NewQueue(ent(50, X), []qlock.Entry{ent(49, X), ent(50, X), ent(48, X)}, true)
	if _, must := p.MustRead(); must {
		t.Fatal("MustRead with known entries left")
	}
	p.Gone("k49")
	p.Gone("k48")
	if below, must := p.MustRead(); !must || below != 48 {
		t.Fatalf("MustRead = %d, %v; want below 48", below, must)
	}
	// A read below an older position than the unknown entries' bound
	// tells nothing about them.
	p.Observed(10, qlock.Entry{}, false)
	if _, must := p.MustRead(); !must {
		t.Fatal("a read below 10 cleared what is unknown below 48")
	}
	p.Observed(48, qlock.Entry{}, false)
	if _, ok := p.Next(); ok {
		t.Fatal("still waits after a read found nothing older")
	}
	// Not truncated: a full, short snapshot needs no read.
	f := qlock.NewQueue(ent(5, X), []qlock.Entry{ent(4, X)}, false)
	f.Gone("k4")
	if _, must := f.MustRead(); must {
		t.Fatal("MustRead on a full snapshot")
	}
}

// queueSim models one lock's queue in a store and the waiters watching it.
// Each live entry has the Queue snapshot its owner took at enqueue; the owner
// only ever learns that the entry it waits on (its Next) was deleted, and
// then calls Gone for exactly that key.
type queueSim struct {
	t      *testing.T
	rng    *rand.Rand
	seq    int64
	live   []qlock.Entry // store contents, in Seq order
	queues map[string]*qlock.Queue
	log    []string
	// hist holds the store's contents after every change, and enqAt the
	// index in hist at which each entry was enqueued: the revisions a read
	// by that entry's owner may see, stale or not.
	hist  [][]qlock.Entry
	enqAt map[string]int
}

func (s *queueSim) record() { s.hist = append(s.hist, slices.Clone(s.live)) }

func (s *queueSim) fail(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("%s\nhistory:\n  %s\nlive: %v", fmt.Sprintf(format, args...), strings.Join(s.log, "\n  "), s.live)
}

func (s *queueSim) isLive(key string) bool {
	return slices.ContainsFunc(s.live, func(e qlock.Entry) bool { return e.Key == key })
}

func (s *queueSim) enqueue() {
	s.seq += 1 + int64(s.rng.IntN(3)) // the store's counter skips numbers
	k := X
	if s.rng.IntN(2) == 0 {
		k = S
	}
	me := ent(s.seq, k)
	s.live = append(s.live, me)
	// The enqueue reads the whole range, in no particular order.
	seen := slices.Clone(s.live)
	s.rng.Shuffle(len(seen), func(i, j int) { seen[i], seen[j] = seen[j], seen[i] })
	if s.rng.IntN(2) == 0 { // with or without its own entry
		seen = slices.DeleteFunc(seen, func(e qlock.Entry) bool { return e == me })
	}
	more := false
	if s.rng.IntN(2) == 0 {
		// A partial read, as etcd's enqueue makes: the newest conflicting
		// entries only, and whether there are more.
		var c []qlock.Entry
		for _, e := range s.live {
			if e.Seq < me.Seq && qlock.Conflicts(me.Kind, e.Kind) {
				c = append(c, e)
			}
		}
		keep := qlock.ViewKeep
		if len(c) > keep {
			c, more = c[len(c)-keep:], true
		}
		seen = append(c, me)
	}
	s.queues[me.Key] = qlock.NewQueue(me, seen, more)
	s.record()
	if s.enqAt == nil {
		s.enqAt = map[string]int{}
	}
	s.enqAt[me.Key] = len(s.hist) - 1
	s.log = append(s.log, fmt.Sprintf("enqueue %v", me))
}

// remove deletes a random live entry: a holder releasing or a waiter dying.
func (s *queueSim) remove() {
	i := s.rng.IntN(len(s.live))
	e := s.live[i]
	s.live = slices.Delete(s.live, i, i+1)
	delete(s.queues, e.Key)
	s.record()
	s.log = append(s.log, fmt.Sprintf("delete %v", e))
}

// pending returns the waiters whose Next was deleted and who have not been
// told yet, in Seq order.
func (s *queueSim) pending() []string {
	var out []string
	for _, e := range s.live {
		q := s.queues[e.Key]
		if _, must := q.MustRead(); must {
			out = append(out, e.Key)
		} else if n, ok := q.Next(); ok && !s.isLive(n.Key) {
			out = append(out, e.Key)
		}
	}
	return out
}

// notify tells waiter key that the entry it waits on was deleted.
func (s *queueSim) notify(key string) {
	q := s.queues[key]
	if below, must := q.MustRead(); must {
		s.observe(key, below)
		return
	}
	n, ok := q.Next()
	if !ok || s.isLive(n.Key) {
		s.fail("notify %s: its Next %v, %v was not deleted", key, n, ok)
	}
	q.Gone(n.Key)
	s.log = append(s.log, fmt.Sprintf("%s sees %s gone", key, n.Key))
	if s.rng.IntN(2) == 0 {
		s.observe(key, n.Seq)
	}
}

// observe gives waiter key what a read of the nearest conflicting entry
// older than below returns, from a member that may lag: the store as it was
// at any point since the waiter enqueued.
func (s *queueSim) observe(key string, below int64) {
	q := s.queues[key]
	from := s.enqAt[key]
	view := s.hist[from+s.rng.IntN(len(s.hist)-from)]
	var nearest qlock.Entry
	found := false
	for _, e := range view {
		if e.Seq < below && qlock.Conflicts(q.Me().Kind, e.Kind) {
			nearest, found = e, true
		}
	}
	q.Observed(below, nearest, found)
	s.log = append(s.log, fmt.Sprintf("%s reads below %d: %v %v", key, below, nearest, found))
}

func (s *queueSim) settle() {
	for p := s.pending(); len(p) > 0; p = s.pending() {
		s.notify(p[s.rng.IntN(len(p))])
	}
}

// model is the rule stated independently of the code under test, on the
// store's true contents: an exclusive entry waits on its immediate live
// predecessor, a shared one on the nearest live exclusive entry ahead.
func (s *queueSim) model(me qlock.Entry) (qlock.Entry, bool) {
	for i := len(s.live) - 1; i >= 0; i-- {
		e := s.live[i]
		if e.Seq >= me.Seq {
			continue
		}
		if me.Kind == qlock.Exclusive || e.Kind == qlock.Exclusive {
			return e, true
		}
	}
	return qlock.Entry{}, false
}

// check verifies the invariants. settled says every waiter has been told of
// every deletion of the entry it waits on.
func (s *queueSim) check(settled bool) {
	s.t.Helper()
	var holders []qlock.Entry
	for _, e := range s.live {
		q := s.queues[e.Key]
		if q.Me() != e {
			s.fail("Me() = %v, want %v", q.Me(), e)
		}
		// The snapshot never holds an entry the store does not have ahead.
		for _, a := range q.Ahead() {
			if a.Seq >= e.Seq {
				s.fail("%v has %v in its snapshot", e, a)
			}
		}
		snapNext, snapWaits := q.Next()
		trueNext, trueWaits := s.model(e)
		if _, must := q.MustRead(); must {
			// Neither holding nor waiting on a known entry: it reads
			// first (settle delivers the read).
			continue
		}
		if !snapWaits {
			holders = append(holders, e)
			// Holding on the snapshot alone is always sound.
			if trueWaits {
				s.fail("%v holds by its snapshot %v but must wait on %v", e, q.Ahead(), trueNext)
			}
		}
		// (b) Once told of the deletions it watches, a waiter decides as if
		// it had re-read the store.
		if !snapWaits || s.isLive(snapNext.Key) {
			if snapWaits != trueWaits || snapNext != trueNext {
				s.fail("%v: snapshot says (%v, %v), store says (%v, %v); snapshot %v",
					e, snapNext, snapWaits, trueNext, trueWaits, q.Ahead())
			}
		}
	}
	// (a) Mutual exclusion: an exclusive holder holds alone.
	if len(holders) > 1 {
		for _, h := range holders {
			if h.Kind == qlock.Exclusive {
				s.fail("exclusive %v holds together with %v", h, holders)
			}
		}
	}
	if !settled {
		return
	}
	// (c) FIFO: the holders are the oldest live entries.
	if !slices.Equal(holders, s.live[:len(holders)]) {
		s.fail("holders %v are not a prefix of the queue", holders)
	}
	// (d) No deadlock: someone holds whenever anyone is queued.
	if len(s.live) > 0 && len(holders) == 0 {
		s.fail("nobody holds")
	}
	// Settled, the holders are exactly the first exclusive entry alone, or
	// all the readers before the first exclusive one.
	want := 0
	if len(s.live) > 0 && s.live[0].Kind == qlock.Exclusive {
		want = 1
	} else {
		for want < len(s.live) && s.live[want].Kind == qlock.Shared {
			want++
		}
	}
	if len(holders) != want {
		s.fail("%d holders %v, want the first %d", len(holders), holders, want)
	}
}

func TestQueueProperties(t *testing.T) {
	const cases = 5000
	rng := rand.New(rand.NewPCG(20240601, 7))
	for c := range cases {
		s := &queueSim{t: t, rng: rng, queues: map[string]*qlock.Queue{}}
		// Mode 0: every waiter is told at once (synchronous watches).
		// Mode 1: notifications are delayed and delivered in random order.
		async := c%2 == 1
		n := 1 + rng.IntN(14)
		for range n {
			s.enqueue()
			if !async {
				s.settle()
			}
			s.check(len(s.pending()) == 0)
		}
		extra := rng.IntN(n + 1) // late arrivals while the queue drains
		for len(s.live) > 0 {
			p := s.pending()
			switch r := rng.IntN(10); {
			case r < 2 && extra > 0:
				extra--
				s.enqueue()
			case r < 6 && async && len(p) > 0:
				s.notify(p[rng.IntN(len(p))])
			default:
				s.remove()
			}
			if !async {
				s.settle()
			}
			s.check(len(s.pending()) == 0)
			if async && rng.IntN(4) == 0 {
				s.settle()
				s.check(true)
			}
		}
	}
}

// TestCounted checks the line's rule: a counted entry waits for the
// nearest counted entry ahead, like a Mutex's waiter, and lock entries do
// not count.
func TestCounted(t *testing.T) {
	q := queueOf
	if w, ok := qlock.RuleOf(N).Waits(q(X, S, N, X)); !ok || w.Seq != 3 {
		t.Fatalf("Waits = %v, %v; want the counted entry 3", w, ok)
	}
	if w, ok := qlock.RuleOf(N).Waits(q(X, S)); ok {
		t.Fatalf("Waits = %v among lock entries only, want none", w)
	}
}

func TestHolding(t *testing.T) {
	got := qlock.Holding([]qlock.Kind{S, S, X, S})
	if want := []bool{true, true, false, false}; !slices.Equal(got, want) {
		t.Errorf("Holding(S S X S) = %v, want %v", got, want)
	}
	got = qlock.Holding([]qlock.Kind{X, C, C})
	if want := []bool{true, true, false}; !slices.Equal(got, want) {
		t.Errorf("Holding(X C C) = %v, want %v", got, want)
	}
}
