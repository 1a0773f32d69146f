package chaos

import (
	"strings"
	"testing"
)

// multiWorkload returns a MultiWorkload over locks m/a, m/b and m/c with
// their registers, as Setup makes them, without a store.
func multiWorkload(t *testing.T) *MultiWorkload {
	t.Helper()
	w := &MultiWorkload{regs: map[string][]*loggedRegister{}}
	for _, n := range multiPool {
		l := "m/" + n
		mem, err := newMemRegister(l)
		if err != nil {
			t.Fatal(err)
		}
		w.locks = append(w.locks, l)
		w.regs[l] = []*loggedRegister{
			{Register: named{mem, "memory-" + n}},
			{Register: named{mem, "store-" + n}},
			{Register: named{&unfencedRegister{}, "unfenced-" + n}},
		}
	}
	return w
}

// multiHold is a multi-lock acquisition of names (under m/) with
// sequence seq, held from from to to, with a read and write of the
// unfenced register of each of its names, reading reads[i] on names[i].
func multiHold(proc string, seq string, from, to int64, id int64, names []string, reads ...int64) []Op {
	var locks []string
	for _, n := range names {
		locks = append(locks, "m/"+n)
	}
	first := "m/" + names[0] + "@" + seq + ".a1"
	ops := []Op{{Process: proc, Kind: KindAcquire, Locks: locks, Token: first, Invoke: from - ms, Complete: from, Outcome: OK}}
	for i, n := range names {
		ops = append(ops, cs(proc, "m/"+n+"@"+seq+".a1", "unfenced-"+n, id*10+int64(i), from+ms, to-ms, reads[i], OK)...)
	}
	return append(ops, Op{Process: proc, Kind: KindRelease, Token: first, Invoke: to, Complete: to + ms, Outcome: OK})
}

func checksOf(cs []Check) map[string]Check {
	m := map[string]Check{}
	for _, c := range cs {
		m[c.Name+"["+c.Subject+"]"] = c
	}
	return m
}

func TestCheckMulti(t *testing.T) {
	w := multiWorkload(t)
	env := &Env{}
	// Names listed in sorted order, as Lease.Tokens returns them.
	var ok []Op
	ok = append(ok, multiHold("w0", "10", 1*ms, 10*ms, 1, []string{"a", "b"}, 0, 0)...)
	ok = append(ok, multiHold("w1", "20", 12*ms, 20*ms, 2, []string{"b", "c"}, 1, 0)...)
	ok = append(ok, multiHold("w2", "30", 22*ms, 30*ms, 3, []string{"a", "c"}, 1, 1)...)
	// A plain Mutex of c while w0 holds a and b: no name shared.
	ok = append(ok,
		Op{Process: "w3", Kind: KindAcquire, Token: "m/c@15.a3", Invoke: 0, Complete: 2 * ms, Outcome: OK},
		Op{Process: "w3", Kind: KindRelease, Token: "m/c@15.a3", Invoke: 3 * ms, Complete: 4 * ms, Outcome: OK},
	)
	for _, c := range w.Check(env, ok) {
		if !c.OK && !c.Skipped {
			t.Errorf("correct history flagged: %s", c)
		}
	}
	if c := checksOf(w.Check(env, ok))["exclusion[lock]"]; c.Checked != 7 {
		t.Errorf("exclusion checked %d holds, want 7 (2 + 2 + 3, one per name held): %s", c.Checked, c)
	}
	if c := eachLock(w.locks, ok, checkFIFO); !c.OK || c.Checked != 7 {
		t.Errorf("fifo per name: %s", c)
	}

	// w1 acquires b and c while w0 still holds a and b: an overlap on b
	// alone. Its writes on unfenced-b then lose w0's update.
	bad := append([]Op(nil), ok...)
	for i := range bad {
		if bad[i].Process == "w1" {
			bad[i].Invoke -= 8 * ms
			bad[i].Complete -= 8 * ms
			if bad[i].Register == "unfenced-b" && bad[i].Kind == KindRead {
				bad[i].Value = 0
			}
			if bad[i].Register == "unfenced-b" && bad[i].Kind == KindWrite {
				bad[i].Value = 1
			}
		}
	}
	got := checksOf(w.Check(env, bad))
	if c := got["exclusion[lock]"]; c.OK || c.Violations != 1 || !strings.Contains(c.Detail, "b: ") || !strings.Contains(c.Detail, "overlaps") {
		t.Errorf("overlapping hold of b not flagged (once, on b): %s", c)
	}
	if c := got["linearizable[unfenced-b]"]; c.OK || !c.Control {
		t.Errorf("lost update on the control unfenced-b not flagged as a control's: %s", c)
	}
	for _, reg := range []string{"unfenced-a", "unfenced-c"} {
		if c := got["linearizable["+reg+"]"]; !c.OK {
			t.Errorf("%s flagged although no update of it was lost: %s", reg, c)
		}
	}
	if c := eachLock(w.locks, bad, checkLostFirst); c.OK {
		t.Errorf("w0 still holding b when w1 acquired it not flagged: %s", c)
	}

	// A paused child holder of b overlapping w1 is the fences' business,
	// not exclusion's.
	paused := append(append([]Op(nil), ok...),
		Op{Process: "holder-1", Kind: KindAcquire, Token: "m/b@16.b1", Invoke: 0, Complete: 11 * ms, Outcome: OK},
		Op{Process: "holder-1", Kind: KindLost, Token: "m/b@16.b1", Invoke: 40 * ms, Complete: 40 * ms, Outcome: OK},
	)
	if c := checksOf(w.Check(env, paused))["exclusion[lock]"]; !c.OK {
		t.Errorf("paused child holder counted in exclusion: %s", c)
	}

	// An acquisition whose tokens were wrong (the worker records it).
	wrong := append([]Op(nil), ok...)
	wrong[0].Error = "tokens differ"
	if c := checkMultiTokens(wrong); c.OK || c.Violations != 1 {
		t.Errorf("wrong tokens not flagged: %s", c)
	}
}

func TestLockView(t *testing.T) {
	ops := multiHold("w0", "5", 10*ms, 20*ms, 1, []string{"a", "b"}, 0, 0)
	ops = append(ops, Op{Process: "nemesis", Kind: KindFault, Fault: NemRevoke + "/force", Token: "m/a@5.a1", Invoke: 15 * ms, Complete: 16 * ms, Outcome: OK})
	v := lockView(ops, "m/b")
	var kinds []string
	for _, op := range v {
		kinds = append(kinds, op.Kind+" "+op.Token)
	}
	want := []string{"acquire m/b@5.a1", "read m/b@5.a1", "write m/b@5.a1", "release m/b@5.a1", "fault m/b@5.a1"}
	if strings.Join(kinds, ", ") != strings.Join(want, ", ") {
		t.Errorf("view of m/b:\n got %q\nwant %q", kinds, want)
	}
	// Revoking a's entry forced the whole acquisition out, in b's view too.
	if f := forcedExpiries(v); len(f["w0"]) != 1 {
		t.Errorf("forced expiries in b's view: %v", f)
	}
	if v := lockView(ops, "m/c"); len(v) != 1 || v[0].Kind != KindFault {
		t.Errorf("view of m/c: %v", v)
	}
}
