package chaos

import "testing"

// The election checkers on hand-written histories: each must pass a
// correct one and flag the violation it exists for.

func campaign(proc, token string, prio int, from, to int64) Op {
	return Op{Process: proc, Kind: KindAcquire, Mode: "leader", Priority: prio, Token: token, Invoke: from, Complete: to, Outcome: OK}
}

func handoff(proc, from, to, next, leader string, at int64) Op {
	return Op{Process: proc, Kind: KindHandOff, Mode: "next", Token: from, To: to, Next: next, Leader: leader, Invoke: at, Complete: at + ms, Outcome: OK}
}

// successions is w0 leading term 1 and handing off to w1 (term 2), which
// resigns; w2 then wins term 3.
func successions() []Op {
	return []Op{
		campaign("w0", tok("1"), 0, 0, 1*ms),
		campaign("w1", tok("2"), 0, 2*ms, 11*ms),
		handoff("w0", tok("1"), "", tok("2"), "w1", 10*ms),
		{Process: "w1", Kind: KindRelease, Mode: "resign", Token: tok("2"), Invoke: 20 * ms, Complete: 21 * ms, Outcome: OK},
		campaign("w2", tok("3"), 0, 15*ms, 22*ms),
	}
}

func TestCheckElectionHandOffs(t *testing.T) {
	if c := checkHandOffs(successions()); !c.OK || c.Checked != 1 {
		t.Errorf("correct handoff flagged: %s", c)
	}
	// The handoff says term 2 is w1's, w1's Campaign returned another.
	bad := successions()
	bad[1].Token = tok("4")
	if c := checkHandOffs(bad); c.OK {
		t.Errorf("handoff token unlike the successor's Campaign's not flagged: %s", c)
	}
	// Term 2 was won by another candidate (another owner) than the
	// handoff named.
	bad = successions()
	bad[1].Process, bad[1].Token = "w2", "l@2.b2"
	if c := checkHandOffs(bad); c.OK {
		t.Errorf("handoff naming another leader than the term's not flagged: %s", c)
	}
	// Asked for w2, handed to w1.
	bad = successions()
	bad[2].To, bad[2].Mode = "w2", "named"
	if c := checkHandOffs(bad); c.OK {
		t.Errorf("handoff to another candidate than the one asked for not flagged: %s", c)
	}
	// An older term.
	bad = successions()
	bad[2].Token = tok("3")
	if c := checkHandOffs(bad); c.OK {
		t.Errorf("handoff to an older term not flagged: %s", c)
	}
	// The successor's Campaign gave up as it won: counted, not flagged.
	gaveUp := successions()
	gaveUp[1].Outcome, gaveUp[1].Token = Fail, ""
	if c := checkHandOffs(gaveUp); !c.OK {
		t.Errorf("successor that gave up flagged: %s", c)
	}
}

func TestCheckElectionTermsIncrease(t *testing.T) {
	if c := checkTermsIncrease(successions()); !c.OK {
		t.Errorf("increasing terms flagged: %s", c)
	}
	bad := successions()
	bad[4].Token = tok("1") // w2's campaign began after w1 had won term 2
	if c := checkTermsIncrease(bad); c.OK {
		t.Errorf("a term going back not flagged: %s", c)
	}
}

func TestCheckElectionExclusionKept(t *testing.T) {
	// w0's handoff finds no candidate: it keeps leading until it
	// resigns at 30 ms, and w1 may not lead before.
	ops := []Op{
		campaign("w0", tok("1"), 0, 0, 1*ms),
		{Process: "w0", Kind: KindHandOff, Mode: "named", Token: tok("1"), To: "w3", Invoke: 10 * ms, Complete: 11 * ms, Outcome: Fail, Kept: true},
		{Process: "w0", Kind: KindRelease, Mode: "resign", Token: tok("1"), Invoke: 30 * ms, Complete: 31 * ms, Outcome: OK},
		campaign("w1", tok("2"), 0, 2*ms, 32*ms),
	}
	if c := checkExclusion(ops, "election"); !c.OK {
		t.Errorf("correct kept handoff flagged: %s", c)
	}
	ops[3].Complete = 20 * ms
	if c := checkExclusion(ops, "election"); c.OK {
		t.Errorf("a leader while the kept one still led not flagged: %s", c)
	}
}

func TestCheckElectionPreempted(t *testing.T) {
	// w0 (priority 0, grace 10 ms) is forced out by w1 (priority 2),
	// which waited past the grace: w1 leads before w0 learned its entry
	// was deleted. Forced: left out of the exclusion check.
	preempted := func() []Op {
		w0 := campaign("w0", tok("1"), 0, 0, 1*ms)
		w0.Grace = 10 * ms
		return []Op{
			w0,
			campaign("w1", tok("2"), 2, 2*ms, 20*ms),
			{Process: "w0", Kind: KindLost, Mode: "leader", Token: tok("1"), Invoke: 25 * ms, Complete: 25 * ms, Outcome: OK, Fault: faultEntryGone},
		}
	}
	if c := checkExclusion(preempted(), "election"); !c.OK {
		t.Errorf("preempted leader not left out: %s", c)
	}
	// Told by a failed Resign rather than a lost event (a leader cut off).
	cut := preempted()
	cut[2] = Op{Process: "w0", Kind: KindRelease, Mode: "resign", Token: tok("1"), Invoke: 22 * ms, Complete: 40 * ms, Outcome: Fail}
	if c := checkExclusion(cut, "election"); !c.OK {
		t.Errorf("preempted leader that resigned in vain not left out: %s", c)
	}
	// No candidate of a higher priority: a violation.
	bad := preempted()
	bad[1].Priority = 0
	if c := checkExclusion(bad, "election"); c.OK {
		t.Errorf("overlap without a preemption not flagged: %s", c)
	}
	// Within the grace: no preemption could have forced it yet.
	bad = preempted()
	bad[0].Grace = 30 * ms
	if c := checkExclusion(bad, "election"); c.OK {
		t.Errorf("overlap within the grace not flagged: %s", c)
	}
	// A leader that resigned (handed off) cleanly was not forced.
	bad = preempted()
	bad[2] = Op{Process: "w0", Kind: KindRelease, Mode: "resign", Token: tok("1"), Invoke: 22 * ms, Complete: 23 * ms, Outcome: OK}
	if c := checkExclusion(bad, "election"); c.OK {
		t.Errorf("overlap with a clean resignation not flagged: %s", c)
	}
}

func TestCheckElectionObserve(t *testing.T) {
	obs := func(p, token string, at int64) Op {
		return Op{Process: p, Kind: KindObserve, Token: token, Invoke: at, Complete: at, Outcome: OK}
	}
	ops := append(successions(), obs("o0", tok("1"), 5*ms), obs("o0", tok("2"), 12*ms), obs("o0", "", 21*ms), obs("o0", tok("3"), 23*ms))
	if c := checkObserveOrder(ops); !c.OK {
		t.Errorf("correct observations flagged: %s", c)
	}
	// "No leader" between a handoff's two terms.
	bad := append(successions(), obs("o0", tok("1"), 5*ms), obs("o0", "", 9*ms), obs("o0", tok("2"), 12*ms))
	if c := checkObserveOrder(bad); c.OK {
		t.Errorf("no leader within a handoff not flagged: %s", c)
	}
	// A term seen again after "no leader".
	bad = append(successions(), obs("o0", tok("3"), 23*ms), obs("o0", "", 24*ms), obs("o0", tok("3"), 25*ms))
	if c := checkObserveOrder(bad); c.OK {
		t.Errorf("a term seen twice not flagged: %s", c)
	}
}
