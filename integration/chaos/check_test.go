package chaos

import (
	"strings"
	"testing"

	"github.com/distlock/distlock"
)

// The checkers on hand-written histories: each must pass a correct one
// and flag the violation it exists for. A checker that never fails proves
// nothing.

const ms = int64(1e6)

// tok is a token of lock l with sequence seq, all of one owner (the
// checkers compare sequences; forks are the fences' business).
func tok(seq string) string { return "l@" + seq + ".a1" }

// cs returns the read and write of one critical section.
func cs(proc, token, reg string, id int64, from, to int64, read int64, wrote Outcome) []Op {
	return []Op{
		{Process: proc, Kind: KindRead, Register: reg, Token: token, CS: id, Invoke: from, Complete: from + ms, Outcome: OK, Value: read},
		{Process: proc, Kind: KindWrite, Register: reg, Token: token, CS: id, Invoke: to - ms, Complete: to, Outcome: wrote, Value: read + 1},
	}
}

func TestCheckLinearizable(t *testing.T) {
	env := &Env{}
	var ok []Op
	ok = append(ok, cs("w0", tok("1"), "r", 1, 0, 10*ms, 0, OK)...)
	ok = append(ok, cs("w1", tok("2"), "r", 2, 20*ms, 30*ms, 1, OK)...)
	// A paused holder's write refused by the fence: fine.
	ok = append(ok, cs("h", tok("3"), "r", 3, 31*ms, 90*ms, 2, Fail)...)
	ok = append(ok, cs("w2", tok("4"), "r", 4, 40*ms, 50*ms, 2, OK)...)
	// An unknown write that may have applied.
	ok = append(ok, cs("w0", tok("5"), "r", 5, 60*ms, 70*ms, 3, Info)...)
	if c := checkLinearizable(env, ok, "r"); !c.OK || c.Skipped {
		t.Errorf("correct history flagged: %s", c)
	}
	// The same paused holder's write admitted (no fence): lost update.
	bad := append([]Op(nil), ok...)
	for i := range bad {
		if bad[i].Process == "h" {
			bad[i].Outcome = OK
		}
	}
	if c := checkLinearizable(env, bad, "r"); c.OK {
		t.Errorf("lost update not flagged: %s", c)
	}
}

func TestCheckTokensIncrease(t *testing.T) {
	var a admissions
	for _, s := range []int64{1, 2, 2, 5} {
		a.add(s, mustToken(t, tok(string(rune('0'+s)))))
	}
	if c := checkTokensIncrease("r", a.sorted()); !c.OK {
		t.Errorf("increasing tokens flagged: %s", c)
	}
	a.add(6, mustToken(t, tok("3")))
	if c := checkTokensIncrease("r", a.sorted()); c.OK || c.Violations != 1 {
		t.Errorf("a token going back not flagged: %s", c)
	}
}

func TestCheckNoStale(t *testing.T) {
	ops := append(cs("w0", tok("2"), "r", 1, 0, 10*ms, 0, OK), cs("w1", tok("1"), "r", 2, 20*ms, 30*ms, 1, Fail)...)
	if c := checkNoStale(ops, "r"); !c.OK {
		t.Errorf("refused stale write flagged: %s", c)
	}
	ops[3].Outcome = OK
	if c := checkNoStale(ops, "r"); c.OK {
		t.Errorf("admitted stale write not flagged: %s", c)
	}
}

func TestCheckLostFirst(t *testing.T) {
	ops := []Op{
		{Process: "w0", Kind: KindAcquire, Token: tok("1"), Invoke: 0, Complete: ms, Outcome: OK},
		{Process: "w0", Kind: KindLost, Token: tok("1"), Invoke: 5 * ms, Complete: 5 * ms, Outcome: OK},
		{Process: "w1", Kind: KindAcquire, Token: tok("2"), Invoke: 0, Complete: 6 * ms, Outcome: OK},
		{Process: "w1", Kind: KindRelease, Token: tok("2"), Invoke: 7 * ms, Complete: 8 * ms, Outcome: OK},
		{Process: "w2", Kind: KindAcquire, Token: tok("3"), Invoke: 0, Complete: 9 * ms, Outcome: OK},
	}
	if c := checkLostFirst(ops); !c.OK || c.Checked != 2 {
		t.Errorf("clean handoffs flagged: %s", c)
	}
	ops[1].Invoke = 7 * ms // told "lost" only after the successor acquired
	if c := checkLostFirst(ops); c.OK {
		t.Errorf("late loss not flagged: %s", c)
	}
	// ... unless its session was expired from outside.
	ops = append(ops, Op{Process: "nemesis", Kind: KindFault, Fault: NemExpireSession, Target: "w0", Invoke: 2 * ms, Complete: 2 * ms, Outcome: OK})
	if c := checkLostFirst(ops); !c.OK {
		t.Errorf("forced expiry not excluded: %s", c)
	}
}

func TestCheckExclusionAndFIFO(t *testing.T) {
	ops := []Op{
		{Process: "w0", Kind: KindAcquire, Mode: "read", Token: tok("1"), Complete: ms, Outcome: OK},
		{Process: "w1", Kind: KindAcquire, Mode: "read", Token: tok("2"), Complete: ms / 2, Outcome: OK},
		{Process: "w0", Kind: KindRelease, Mode: "read", Token: tok("1"), Invoke: 3 * ms, Outcome: OK},
		{Process: "w1", Kind: KindRelease, Mode: "read", Token: tok("2"), Invoke: 3 * ms, Outcome: OK},
		{Process: "w2", Kind: KindAcquire, Mode: "write", Token: tok("3"), Complete: 4 * ms, Outcome: OK},
		{Process: "w2", Kind: KindRelease, Mode: "write", Token: tok("3"), Invoke: 5 * ms, Outcome: OK},
	}
	if c := checkExclusion(ops, "rw"); !c.OK {
		t.Errorf("readers together flagged: %s", c)
	}
	if c := checkFIFO(ops); !c.OK {
		t.Errorf("readers returning out of order flagged: %s", c)
	}
	ops[4].Complete = 2 * ms // the writer while the readers hold
	if c := checkExclusion(ops, "rw"); c.OK {
		t.Errorf("writer overlapping readers not flagged: %s", c)
	}
	ops[4].Complete = ms / 4 // the writer before the readers it queued behind
	if c := checkFIFO(ops); c.OK || !strings.Contains(c.Detail, "w2") {
		t.Errorf("out-of-order grant not flagged: %s", c)
	}
}

func TestCheckObserveOrder(t *testing.T) {
	ops := []Op{
		{Process: "w0", Kind: KindAcquire, Token: tok("1"), Outcome: OK},
		{Process: "w1", Kind: KindAcquire, Token: tok("2"), Outcome: OK},
		{Process: "o0", Kind: KindObserve, Token: tok("1"), Outcome: OK},
		{Process: "o0", Kind: KindObserve, Token: "", Outcome: OK},
		{Process: "o0", Kind: KindObserve, Token: tok("2"), Outcome: OK},
	}
	if c := checkObserveOrder(ops); !c.OK {
		t.Errorf("ordered observations flagged: %s", c)
	}
	ops = append(ops, Op{Process: "o0", Kind: KindObserve, Token: tok("1"), Outcome: OK})
	if c := checkObserveOrder(ops); c.OK {
		t.Errorf("observation going back not flagged: %s", c)
	}
	if c := checkOneLeaderPerTerm(append(ops, Op{Process: "w2", Kind: KindAcquire, Token: tok("2"), Outcome: OK})); c.OK {
		t.Errorf("two leaders of one term not flagged: %s", c)
	}
}

func mustToken(t *testing.T, s string) distlock.Token {
	t.Helper()
	tk, err := distlock.ParseToken(s)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// permit returns an acquisition of a permit of slot slot with sequence seq,
// held from from to to.
func permit(proc string, slot int, seq string, from, to int64) []Op {
	t := "s/slot-" + string(rune('0'+slot)) + "@" + seq + ".a1"
	return []Op{
		{Process: proc, Kind: KindAcquire, Mode: "permit", Token: t, Invoke: from - ms, Complete: from, Outcome: OK},
		{Process: proc, Kind: KindRelease, Mode: "permit", Token: t, Invoke: to, Complete: to + ms, Outcome: OK},
	}
}

func TestCheckSemaphore(t *testing.T) {
	var ok []Op
	ok = append(ok, permit("w0", 0, "1", 0, 10*ms)...)
	ok = append(ok, permit("w1", 1, "2", 5*ms, 20*ms)...)
	ok = append(ok, permit("w2", 0, "3", 11*ms, 30*ms)...) // slot 0's next holder
	for _, c := range []Check{checkSlotExclusion(ok), checkAtMostN(ok, 2), checkSlotTokens(ok)} {
		if !c.OK {
			t.Errorf("correct history flagged: %s", c)
		}
	}
	// Two holds of slot 0 at once; three holds at once with N=2.
	bad := append(append([]Op{}, ok...), permit("w3", 0, "4", 12*ms, 15*ms)...)
	if c := checkSlotExclusion(bad); c.OK {
		t.Errorf("overlapping holds of one slot passed: %s", c)
	}
	if c := checkAtMostN(bad, 2); c.OK {
		t.Errorf("three holds at once passed with N=2: %s", c)
	}
	// A slot's later holder with an older token.
	back := append(append([]Op{}, ok...), permit("w3", 1, "1", 40*ms, 45*ms)...)
	if c := checkSlotTokens(back); c.OK {
		t.Errorf("a slot's token going back passed: %s", c)
	}
}
