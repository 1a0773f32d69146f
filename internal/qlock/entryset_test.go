package qlock

import (
	"context"
	"errors"
	"testing"

	"github.com/distlock/distlock"
)

// set returns an entry set of one entry per (own Seq, entries ahead) pair,
// each alive under the background context.
func set(t *testing.T, mine []int64, ahead [][]Entry) *entrySet {
	t.Helper()
	s := &entrySet{label: "a+b"}
	for i, seq := range mine {
		me := Entry{Key: string(rune('a'+i)) + "/me", Seq: seq, Kind: Exclusive}
		n := &Node{Name: string(rune('a' + i)), Entry: me}
		n.Begin(context.Background())
		t.Cleanup(func() { n.kill(nil) })
		s.ns = append(s.ns, n)
		s.qs = append(s.qs, NewQueue(me, ahead[i], false))
	}
	return s
}

// A multi-lock waits on the newest entry ahead of any of its entries, and
// on nothing once every view is clear.
func TestEntrySetNext(t *testing.T) {
	x := func(key string, seq int64) Entry { return Entry{Key: key, Seq: seq, Kind: Exclusive} }
	s := set(t, []int64{10, 10, 10}, [][]Entry{{x("a/1", 3)}, {x("b/1", 2), x("b/2", 7)}, nil})
	i, p, ok := s.next()
	if !ok || i != 1 || p.Key != "b/2" {
		t.Fatalf("next = %d, %v, %v; want 1, b/2, true", i, p, ok)
	}
	s.qs[1].Observed(10, Entry{}, false)
	if i, p, ok = s.next(); !ok || i != 0 || p.Key != "a/1" {
		t.Fatalf("next = %d, %v, %v; want 0, a/1, true", i, p, ok)
	}
	s.qs[0].Gone("a/1")
	if _, _, ok = s.next(); ok {
		t.Fatal("next found an entry to wait on with every view clear")
	}
}

// An entry's end wins over a wait's own error, naming its lock when the
// set has several; a release is no end.
func TestEntrySetLost(t *testing.T) {
	s := set(t, []int64{5, 5}, [][]Entry{nil, nil})
	other := errors.New("ctx ended")
	if err := s.or(other); err != other {
		t.Fatalf("or = %v, want the wait's own error", err)
	}
	s.ns[0].kill(distlock.ErrReleased)
	if err := s.lost(); err != nil {
		t.Fatalf("lost after a release = %v, want nil", err)
	}
	s.ns[1].kill(distlock.ErrEntryGone)
	err := s.or(other)
	if !errors.Is(err, distlock.ErrEntryGone) || err.Error() != `entry of lock "b": `+distlock.ErrEntryGone.Error() {
		t.Fatalf("or = %v, want b's entry gone", err)
	}
	one := set(t, []int64{5}, [][]Entry{nil})
	one.ns[0].kill(distlock.ErrEntryGone)
	if err := one.lost(); err != distlock.ErrEntryGone {
		t.Fatalf("lost of one entry = %v, want its cause unwrapped", err)
	}
}

// joined keeps a single error as it is.
func TestJoined(t *testing.T) {
	a, b := errors.New("a"), errors.New("b")
	if joined(nil) != nil || joined([]error{nil, nil}) != nil {
		t.Fatal("joined of no error is not nil")
	}
	if joined([]error{nil, a}) != a {
		t.Fatal("joined of one error is not that error")
	}
	if err := joined([]error{a, nil, b}); !errors.Is(err, a) || !errors.Is(err, b) {
		t.Fatalf("joined = %v, want both", err)
	}
}
