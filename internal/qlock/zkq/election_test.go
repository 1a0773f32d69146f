package zkq

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/testserve"
	"github.com/go-zookeeper/zk"
)

func TestElectionEntryNames(t *testing.T) {
	guid := newGUID()
	for _, prio := range []int{0, 1, -1, 5, -5, 42, distlock.MaxPriority, -distlock.MaxPriority} {
		child := entryBase(qlock.Candidate, guid, prio, "", false) + "0000000007"
		g, p, seq, ok := parseElectionEntry(child)
		if !ok || g != guid || p != prio || seq != 7 {
			t.Errorf("parseElectionEntry(%q) = %q, %d, %d, %v; want %q, %d, 7, true", child, g, p, seq, ok, guid, prio)
		}
		if k, g, seq, ok := parseAny(child); !ok || k != qlock.Candidate || g != guid || seq != 7 {
			t.Errorf("parseAny(%q) = %v, %q, %d, %v", child, k, g, seq, ok)
		}
		if _, _, _, ok := parseEntry(child); ok {
			t.Errorf("parseEntry accepts the candidate %q", child)
		}
	}
	if got, want := entryBase(qlock.Candidate, guid, 0, "", false), "@e-"+guid+"-"; got != want {
		t.Errorf("priority 0's base is %q, want %q (the name without a priority)", got, want)
	}
	if got, want := entryBase(qlock.Candidate, guid, -5, "", false), "@e-"+guid+"-p-5-"; got != want {
		t.Errorf("priority -5's base is %q, want %q", got, want)
	}
	if got, want := entryBase(qlock.Exclusive, guid, 5, "", false), "@w-"+guid+"-"; got != want {
		t.Errorf("a lock entry's base is %q, want %q (no priority)", got, want)
	}
	for _, bad := range []string{
		"p0-", "p05-", "p+5-", "p--5-", "p-0-", "p-", "p", "p5", "px-",
		fmt.Sprintf("p%d-", distlock.MaxPriority+1), fmt.Sprintf("p%d-", -distlock.MaxPriority-1),
	} {
		child := "@e-" + guid + "-" + bad + "0000000007"
		if _, _, _, ok := parseElectionEntry(child); ok {
			t.Errorf("parseElectionEntry accepts %q", child)
		}
	}
	lock := entryBase(qlock.Exclusive, guid, 0, "", false) + "0000000003"
	if k, g, seq, ok := parseAny(lock); !ok || k != qlock.Exclusive || g != guid || seq != 3 {
		t.Errorf("parseAny(%q) = %v, %q, %d, %v", lock, k, g, seq, ok)
	}
	if _, _, _, ok := parseElectionEntry(lock); ok {
		t.Errorf("parseElectionEntry accepts the lock entry %q", lock)
	}
}

// electionEnv is one ZooKeeper server with a Session on it, and a second
// connection to play other clients.
type electionEnv struct {
	ctx   context.Context
	s     *Session
	other *zk.Conn
}

func newElectionEnv(t *testing.T) *electionEnv {
	t.Helper()
	ens := testserve.NewZooKeeper(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	conn, _, err := ens.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	other, _, err := ens.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	cfg := Config{Options: qlock.Options{Prefix: "/distlock"}.Defaults(), Tick: testserve.ZooKeeperTickTime, ACL: zk.WorldACL(zk.PermAll)}
	s, err := NewSession(ctx, conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		u := s.User()
		_ = u.Close(context.Background())
	})
	return &electionEnv{ctx: ctx, s: s, other: other}
}

// candidate enqueues a candidate of election name.
func (e *electionEnv) candidate(t *testing.T, name, value string, prio int) *qlock.Node {
	t.Helper()
	n, _, _, err := e.s.Enqueue(e.ctx, name, qlock.Request{Op: distlock.OpCampaign, Kind: qlock.Candidate, Value: []byte(value), Priority: prio})
	if err != nil {
		t.Fatal(err)
	}
	n.Name = name
	n.Begin(e.ctx)
	return n
}

func (e *electionEnv) read(t *testing.T, name string) qlock.ElectionState {
	t.Helper()
	st, err := e.s.ReadElection(e.ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func contender(t *testing.T, st qlock.ElectionState, key string) qlock.Contender {
	t.Helper()
	for _, c := range st.Contenders {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("%s is not among the candidates of %+v", key, st)
	return qlock.Contender{}
}

func isLeader(st qlock.ElectionState, key string) bool {
	for _, c := range st.Contenders {
		if c.Key == key {
			return st.Leader == key
		}
	}
	return false
}

func TestElectionClaimAndHandOff(t *testing.T) {
	e := newElectionEnv(t)
	const name = "claim"
	a := e.candidate(t, name, "a", 0)
	b := e.candidate(t, name, "b", 7)
	c := e.candidate(t, name, "c", -3)

	st0 := e.read(t, name)
	if st0.Term != 0 || st0.Leader != "" || len(st0.Contenders) != 3 {
		t.Fatalf("before any claim: %+v, want no term and three candidates", st0)
	}
	for _, x := range []struct {
		n     *qlock.Node
		value string
		prio  int
	}{{a, "a", 0}, {b, "b", 7}, {c, "c", -3}} {
		got := contender(t, st0, x.n.Key)
		want := qlock.Contender{Entry: qlock.Entry{Key: x.n.Key, Seq: x.n.Token, Kind: qlock.Candidate}, Priority: x.prio, Value: x.value, Owner: uint64(e.s.ID())}
		if got != want {
			t.Errorf("candidate %s reads %+v, want %+v", x.value, got, want)
		}
	}

	term, err := e.s.ClaimTerm(e.ctx, a, st0)
	if err != nil {
		t.Fatal(err)
	}
	st1 := e.read(t, name)
	if st1.Term != term || st1.Leader != a.Key || st1.Version != st0.Version+1 {
		t.Fatalf("after a's claim of term %d: %+v", term, st1)
	}
	if _, err := e.s.ClaimTerm(e.ctx, b, st0); !errors.Is(err, qlock.ErrTermMoved) {
		t.Fatalf("a claim on the state before a's: %v, want ErrTermMoved", err)
	}
	if st := e.read(t, name); st.Term != st1.Term || st.Leader != a.Key || st.Version != st1.Version {
		t.Fatalf("a failed claim wrote: %+v, was %+v", st, st1)
	}

	// A handoff to a candidate whose node is gone writes nothing.
	if err := e.other.Delete(c.Key, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.HandOff(e.ctx, a, st1, contender(t, st1, c.Key)); !errors.Is(err, qlock.ErrTermMoved) {
		t.Fatalf("a handoff to a deleted candidate: %v, want ErrTermMoved", err)
	}
	if ok, _, err := e.other.Exists(a.Key); err != nil || !ok {
		t.Fatalf("the failed handoff deleted the leader's node (exists %v, %v)", ok, err)
	}
	if st := e.read(t, name); st.Term != st1.Term || st.Leader != a.Key || st.Version != st1.Version {
		t.Fatalf("a failed handoff wrote: %+v, was %+v", st, st1)
	}
	// And so does one on a record that moved.
	if _, err := e.s.HandOff(e.ctx, a, st0, contender(t, st1, b.Key)); !errors.Is(err, qlock.ErrTermMoved) {
		t.Fatalf("a handoff on an old state: %v, want ErrTermMoved", err)
	}

	term2, err := e.s.HandOff(e.ctx, a, st1, contender(t, st1, b.Key))
	if err != nil {
		t.Fatal(err)
	}
	if term2 <= term {
		t.Fatalf("the handoff's term %d is not after %d", term2, term)
	}
	st2 := e.read(t, name)
	if st2.Term != term2 || st2.Leader != b.Key || !isLeader(st2, b.Key) {
		t.Fatalf("after the handoff to b: %+v", st2)
	}
	for _, x := range st2.Contenders {
		if x.Key == a.Key {
			t.Fatalf("a's node is still there after its handoff: %+v", st2)
		}
	}
	// One write: the leader's node went at the very zxid the record
	// names the successor.
	_, dst, err := e.other.Get(e.s.Dir(name))
	if err != nil {
		t.Fatal(err)
	}
	if dst.Pzxid != dst.Mzxid || dst.Mzxid != term2 {
		t.Fatalf("the delete (pzxid %#x) and the record (mzxid %#x) are not one write of zxid %#x", dst.Pzxid, dst.Mzxid, term2)
	}
}

// watcher collects the states of one WatchElection.
type watcher struct {
	ch   chan qlock.ElectionState
	all  []qlock.ElectionState
	stop context.CancelFunc
}

func (e *electionEnv) watch(t *testing.T, name string) *watcher {
	ctx, cancel := context.WithCancel(e.ctx)
	w := &watcher{ch: make(chan qlock.ElectionState), stop: cancel}
	go e.s.WatchElection(ctx, name, w.ch)
	t.Cleanup(func() {
		cancel()
		for range w.ch {
		}
	})
	return w
}

// until returns the first state f accepts, checking that the states
// never go back.
func (w *watcher) until(t *testing.T, what string, f func(qlock.ElectionState) bool) qlock.ElectionState {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case st, ok := <-w.ch:
			if !ok {
				t.Fatalf("the watch ended waiting for %s", what)
			}
			if n := len(w.all); n > 0 {
				if prev := w.all[n-1]; st.Version < prev.Version || st.Term < prev.Term {
					t.Fatalf("the watch went back: %+v after %+v", st, prev)
				}
			}
			w.all = append(w.all, st)
			if f(st) {
				return st
			}
		case <-timeout:
			t.Fatalf("no state with %s; got %+v", what, w.all)
		}
	}
}

func TestElectionWatch(t *testing.T) {
	e := newElectionEnv(t)
	const name = "watch"
	w := e.watch(t, name)
	w.until(t, "no directory", func(st qlock.ElectionState) bool { return st.Term == 0 && len(st.Contenders) == 0 })

	a := e.candidate(t, name, "a", 2)
	st := w.until(t, "candidate a", func(st qlock.ElectionState) bool { return len(st.Contenders) == 1 })
	if c := st.Contenders[0]; c.Key != a.Key || c.Seq != a.Token || c.Kind != qlock.Candidate || c.Priority != 2 {
		t.Fatalf("a is watched as %+v", c)
	}
	term, err := e.s.ClaimTerm(e.ctx, a, st)
	if err != nil {
		t.Fatal(err)
	}
	st = w.until(t, "a leading", func(st qlock.ElectionState) bool { return isLeader(st, a.Key) })
	if l := contender(t, st, a.Key); st.Term != term || l.Value != "a" || l.Owner != uint64(e.s.ID()) {
		t.Fatalf("a leads as %+v in %+v, want term %d, value a, owner %#x", l, st, term, e.s.ID())
	}
	if err := e.s.Proclaim(e.ctx, a, "a2"); err != nil {
		t.Fatal(err)
	}
	w.until(t, "a's new value", func(st qlock.ElectionState) bool {
		return isLeader(st, a.Key) && contender(t, st, a.Key).Value == "a2"
	})

	// A handoff is one write: no state in between shows the term vacant.
	b := e.candidate(t, name, "b", 0)
	st = w.until(t, "candidate b", func(st qlock.ElectionState) bool { return len(st.Contenders) == 2 })
	from := len(w.all)
	term2, err := e.s.HandOff(e.ctx, a, st, contender(t, e.read(t, name), b.Key))
	if err != nil {
		t.Fatal(err)
	}
	// The successor learns first from the record alone, read once after
	// the handoff's events; the full state, with the listing, follows.
	part := w.until(t, "b leading", func(st qlock.ElectionState) bool { return isLeader(st, b.Key) })
	if !part.Partial || len(part.Contenders) != 1 || part.Term != term2 {
		t.Fatalf("the first state naming b is %+v, want the record's alone (Partial) of term %d", part, term2)
	}
	st = w.until(t, "the full state", func(st qlock.ElectionState) bool { return !st.Partial })
	if l := contender(t, st, b.Key); !isLeader(st, b.Key) || st.Term != term2 || l.Value != "b" {
		t.Fatalf("b leads as %+v in %+v, want term %d and value b", l, st, term2)
	}
	if st.Version != part.Version || part.Contenders[0] != contender(t, st, b.Key) {
		t.Fatalf("the record's state %+v does not match the full one %+v", part, st)
	}
	for _, s := range w.all[from:] {
		if !isLeader(s, a.Key) && !isLeader(s, b.Key) {
			t.Fatalf("the watch showed no leader during the handoff: %+v", s)
		}
	}

	// The leader's node deleted by someone else: the term is vacant, and
	// the record still names it.
	if err := e.other.Delete(b.Key, -1); err != nil {
		t.Fatal(err)
	}
	st = w.until(t, "the vacancy", func(st qlock.ElectionState) bool { return !isLeader(st, b.Key) })
	if st.Leader != b.Key || st.Term != term2 || len(st.Contenders) != 0 {
		t.Fatalf("after the leader's deletion: %+v, want the record naming %s of term %d, no candidate", st, b.Key, term2)
	}
	if rd := e.read(t, name); rd.Leader != b.Key || rd.Term != term2 || len(rd.Contenders) != 0 {
		t.Fatalf("ReadElection after the leader's deletion: %+v", rd)
	}

	// The next candidate claims the vacant term.
	c := e.candidate(t, name, "c", 0)
	st = w.until(t, "candidate c", func(st qlock.ElectionState) bool { return len(st.Contenders) == 1 })
	term3, err := e.s.ClaimTerm(e.ctx, c, st)
	if err != nil {
		t.Fatal(err)
	}
	if term3 <= term2 {
		t.Fatalf("c's term %d is not after %d", term3, term2)
	}
	w.until(t, "c leading", func(st qlock.ElectionState) bool { return isLeader(st, c.Key) && st.Term == term3 })

	w.stop()
	for range w.ch {
	}
}

// TestElectionRevokeLeader checks that a revocation finds a leader's node
// by its position, not by its token (its term's).
func TestElectionRevokeLeader(t *testing.T) {
	e := newElectionEnv(t)
	const name = "revoke"
	a := e.candidate(t, name, "a", 0)
	if _, err := e.s.ClaimTerm(e.ctx, a, e.read(t, name)); err != nil {
		t.Fatal(err)
	}
	st := e.read(t, name)
	l := contender(t, st, a.Key)
	held := distlock.QueueEntry{Key: l.Key, Kind: distlock.Exclusive, Holding: true, Seq: l.Seq, Token: distlock.Token{Name: name, Seq: st.Term, Owner: l.Owner}}
	if held.Seq == held.Token.Seq {
		t.Fatalf("the leader's position %d is its term's token", held.Seq)
	}
	r := e.s.revokeStore()
	wctx, cancel := context.WithTimeout(e.ctx, 300*time.Millisecond)
	defer cancel()
	if err := r.WaitDeleted(wctx, held); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitGone on the live leader: %v, want it to wait", err)
	}
	other := held
	other.Seq++
	if gone, err := r.DeleteEntry(e.ctx, other); err != nil || !gone {
		t.Fatalf("Delete at another position: gone %v, %v; want gone, nothing deleted", gone, err)
	}
	if ok, _, err := e.other.Exists(a.Key); err != nil || !ok {
		t.Fatalf("Delete at another position deleted the leader's node (exists %v, %v)", ok, err)
	}
	if gone, err := r.DeleteEntry(e.ctx, held); err != nil || gone {
		t.Fatalf("Delete of the leader: gone %v, %v; want deleted", gone, err)
	}
	if err := r.WaitDeleted(e.ctx, held); err != nil {
		t.Fatalf("WaitGone after the delete: %v", err)
	}
	if rd := e.read(t, name); isLeader(rd, a.Key) {
		t.Fatalf("the leader still leads after its node's delete: %+v", rd)
	}
}
