package qlock

import (
	"testing"

	"github.com/distlock/distlock"
)

// TestInOrderForeign: foreign candidates take their turn by their
// position (no candidate leads while an older foreign one is there), and
// an unknown client's children are in no queue.
func TestInOrderForeign(t *testing.T) {
	cand := func(key string, seq int64, prio int, client string) distlock.QueueEntry {
		return distlock.QueueEntry{Key: key, Kind: distlock.Candidate, Token: distlock.Token{Seq: seq}, Priority: prio, Client: client}
	}
	q := []distlock.QueueEntry{
		{Key: "u", Client: distlock.ClientUnknown, Holding: true},
		cand("a", 1, 0, ""),
		cand("latch", 2, 0, distlock.ClientCurator),
		cand("b", 3, 5, ""),
		{Key: "w", Kind: distlock.Exclusive, Token: distlock.Token{Seq: 4}, Holding: true},
		cand("c", 5, 9, ""),
	}
	got := inOrder(q)
	want := []struct {
		key string
		pos int
	}{{"w", 1}, {"a", 1}, {"latch", 2}, {"c", 3}, {"b", 4}, {"u", 0}}
	if len(got) != len(want) {
		t.Fatalf("inOrder: %d entries, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].Key != w.key || got[i].Position != w.pos {
			t.Errorf("entry %d: %s at %d, want %s at %d", i, got[i].Key, got[i].Position, w.key, w.pos)
		}
	}
	if got[len(got)-1].Holding {
		t.Errorf("an unknown child holds")
	}

	es := ElectionState{
		Contenders: []Contender{{Entry: Entry{Key: "b", Seq: 3}}},
		Foreign:    []Entry{{Key: "latch", Seq: 2, Client: distlock.ClientCurator}, {Key: "sel", Seq: 4, Client: distlock.ClientCurator}},
	}
	if !es.foreignLeads("latch") || es.foreignLeads("sel") {
		t.Errorf("foreignLeads: the oldest candidate, a foreign one, leads; no younger one does")
	}
	es.Contenders[0].Seq = 1
	if es.foreignLeads("latch") {
		t.Errorf("foreignLeads: a foreign candidate younger than a candidate leads")
	}
}
