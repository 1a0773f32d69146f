package qlock

import "testing"

// The next in line is the highest priority, the oldest among equals; a
// value picks among the candidates with it; the leader is the record's
// entry only while it exists.
func TestElectionStateNext(t *testing.T) {
	c := func(key string, seq int64, prio int, value string) Contender {
		return Contender{Entry: Entry{Key: key, Seq: seq, Kind: Candidate}, Priority: prio, Value: value}
	}
	st := ElectionState{Term: 10, Leader: "a", Contenders: []Contender{
		c("a", 1, 0, "a"), c("b", 2, 1, "x"), c("c", 3, 5, "x"), c("d", 4, 5, "y"), c("e", 5, -1, "z"),
	}}
	if l, ok := st.leader(); !ok || l.Key != "a" {
		t.Fatalf("leader: %v %v, want a", l, ok)
	}
	for _, tc := range []struct{ but, value, want string }{
		{"a", "", "c"},  // priority 5, older than d
		{"c", "", "d"},  // then d, before the lower priorities
		{"a", "x", "c"}, // of the value x, the higher priority
		{"a", "z", "e"}, // the only z, however low
		{"a", "nobody", ""},
	} {
		got, ok := st.next(tc.but, tc.value)
		if tc.want == "" {
			if ok {
				t.Errorf("next(%q, %q) = %s, want none", tc.but, tc.value, got.Key)
			}
			continue
		}
		if !ok || got.Key != tc.want {
			t.Errorf("next(%q, %q) = %s, %v; want %s", tc.but, tc.value, got.Key, ok, tc.want)
		}
	}
	vacant := ElectionState{Term: 10, Leader: "gone", Contenders: st.Contenders}
	if _, ok := vacant.leader(); ok {
		t.Fatal("a record naming a gone entry has a leader")
	}
	if li := vacant.info("n"); !li.NoLeader() {
		t.Fatalf("info of a vacant term: %+v, want no leader", li)
	}
	if li := st.info("n"); li.Value != "a" || li.Token.Seq != 10 || li.Token.Name != "n" {
		t.Fatalf("info: %+v, want a at 10", li)
	}
}

// A foreign candidate keeps every younger candidate from leading, whatever
// its priority; an older one leads by the foreign client's rule too.
func TestElectionStateNextBehindForeign(t *testing.T) {
	c := func(key string, seq int64, prio int) Contender {
		return Contender{Entry: Entry{Key: key, Seq: seq, Kind: Candidate}, Priority: prio, Value: key}
	}
	f := Entry{Key: "/x/_c_1-latch-0000000003", Seq: 3, Kind: Candidate, Client: "curator"}
	st := ElectionState{Contenders: []Contender{c("a", 2, 0), c("b", 4, 9)}, Foreign: []Entry{f}}
	if got, ok := st.next("", ""); !ok || got.Key != "a" {
		t.Fatalf("next = %s, %v; want a (older than the foreign entry; b, younger, waits for it)", got.Key, ok)
	}
	if got, ok := st.next("a", ""); ok {
		t.Fatalf("next but a = %s; want none: b is younger than the foreign entry", got.Key)
	}
	if e, ok := st.foreignAhead("a", ""); !ok || e.Key != f.Key {
		t.Fatalf("foreignAhead(a) = %v, %v; want the foreign entry", e, ok)
	}
	if _, ok := st.foreignAhead("", ""); ok {
		t.Fatal("foreignAhead with a candidate older than the foreign entry")
	}
	if _, ok := (ElectionState{Foreign: []Entry{f}}).foreignAhead("", ""); ok {
		t.Fatal("foreignAhead with no candidate at all")
	}
}
