package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// The Done-exclusion checker on hand-written histories, and the term log
// that records its intervals on a fake Leadership.

// term is a KindTerm: proc's term tok, its Done open from from to to (0:
// never closed), ended as mode says.
func term(proc, tok string, from, to int64, mode string) Op {
	op := Op{Process: proc, Kind: KindTerm, Token: tok, Invoke: from, Complete: to, Outcome: OK, Mode: mode, Error: mode}
	if to == 0 {
		op.Outcome = Info
	}
	return op
}

// doneHandoff is w0 leading term 1 and handing off to w1 (term 2), which
// resigns; w2 then wins term 3: each Done closes before the next term's
// Campaign returns.
func doneHandoff() []Op {
	return append(successions(),
		term("w0", tok("1"), 1*ms, 10*ms, "released"),
		term("w1", tok("2"), 11*ms, 20*ms, "released"),
		term("w2", tok("3"), 22*ms, 30*ms, "released"),
	)
}

func TestCheckElectionDoneExclusion(t *testing.T) {
	const slack = 20 * time.Millisecond
	if c := checkDoneExclusion(doneHandoff(), slack); !c.OK || c.Skipped || c.Checked != 3 || !strings.Contains(c.Detail, "3 clean") {
		t.Errorf("clean handoffs flagged: %s", c)
	}
	// w0's Done (a Resign or HandOff: released) still open when w1's
	// Campaign returned: a violation, naming both terms.
	bad := doneHandoff()
	bad[5].Complete = 12 * ms
	c := checkDoneExclusion(bad, slack)
	if c.OK || c.Violations != 1 {
		t.Errorf("overlap after a Resign not flagged: %s", c)
	}
	for _, s := range []string{"ended on purpose", "w0 " + tok("1"), "w1 " + tok("2"), "12ms", "11ms"} {
		if !strings.Contains(c.Detail, s) {
			t.Errorf("the violation does not say %q: %s", s, c.Detail)
		}
	}
	// Revoked, then handed over (no loss after): on purpose too.
	bad = doneHandoff()
	bad[5].Complete, bad[5].Mode = 12*ms, "revoked"
	if c := checkDoneExclusion(bad, slack); c.OK {
		t.Errorf("overlap after a cooperative revocation not flagged: %s", c)
	}
	// A Done that never closed overlaps every later term.
	bad = doneHandoff()
	bad[5].Complete, bad[5].Outcome = 0, Info
	if c := checkDoneExclusion(bad, slack); c.OK || c.Violations != 2 || !strings.Contains(c.Detail, "never closed") {
		t.Errorf("a Done never closed not flagged twice: %s", c)
	}

	// Forced ends are counted apart. w0's session expired from outside
	// (zk-expire-session) during its term: w1 leads before w0 hears of it.
	expired := doneHandoff()
	expired[5].Complete, expired[5].Mode = 15*ms, "expired"
	expired = append(expired, Op{Process: "nemesis", Kind: KindFault, Fault: NemExpireSession + "/expire", Target: "w0", Invoke: 5 * ms, Complete: 5 * ms, Outcome: OK})
	if c := checkDoneExclusion(expired, slack); !c.OK || !strings.Contains(c.Detail, "1 overlaps counted apart (0 forced by a preemption, 1 by a nemesis") {
		t.Errorf("overlap after a forced expiry not counted apart: %s", c)
	}
	// ... also when w0 had resigned meanwhile (Done closed as released).
	expired[5].Mode = "released"
	if c := checkDoneExclusion(expired, slack); !c.OK || !strings.Contains(c.Detail, "1 by a nemesis") {
		t.Errorf("resignation of an expired session not counted apart: %s", c)
	}
	// A loss during a fault (a member killed): counted apart; the same
	// loss with no fault anywhere near: a violation.
	killed := doneHandoff()
	killed[5].Complete, killed[5].Mode = 15*ms, "lost"
	if c := checkDoneExclusion(killed, slack); c.OK || !strings.Contains(c.Detail, "no fault or preemption") {
		t.Errorf("unexplained loss not flagged: %s", c)
	}
	killed = append(killed, Op{Process: "nemesis", Kind: KindFault, Fault: NemKill, Target: "n1", Invoke: 2 * ms, Complete: 8 * ms, Outcome: OK})
	if c := checkDoneExclusion(killed, slack); !c.OK || !strings.Contains(c.Detail, "1 losses during a fault") {
		t.Errorf("loss during a fault not counted apart: %s", c)
	}

	// w0 (priority 0, grace 10 ms) forced out by w1 (priority 2), which
	// campaigned past the grace: its Done closes (entry gone) after w1's
	// term began. Counted apart; as a Resign, not (see preempted's cases
	// in TestCheckElectionPreempted).
	preempted := func(mode string, end Op) []Op {
		w0 := campaign("w0", tok("1"), 0, 0, 1*ms)
		w0.Grace = 10 * ms
		return []Op{
			w0,
			campaign("w1", tok("2"), 2, 2*ms, 20*ms),
			end,
			term("w0", tok("1"), 1*ms, 25*ms, mode),
			term("w1", tok("2"), 20*ms, 30*ms, "released"),
		}
	}
	p := preempted("entry-gone", Op{Process: "w0", Kind: KindLost, Mode: "leader", Token: tok("1"), Invoke: 25 * ms, Complete: 25 * ms, Outcome: OK, Fault: faultEntryGone})
	if c := checkDoneExclusion(p, slack); !c.OK || !strings.Contains(c.Detail, "(1 forced by a preemption") {
		t.Errorf("overlap after a forced preemption not counted apart: %s", c)
	}
	p = preempted("revoked>entry-gone", p[2])
	if c := checkDoneExclusion(p, slack); !c.OK {
		t.Errorf("revoked leader forced out not counted apart: %s", c)
	}
	// Cut off, it resigned at 22 ms, after w1's term had begun, and was
	// told it resigned: deposed before it stepped down, counted apart.
	p = preempted("released", Op{Process: "w0", Kind: KindRelease, Mode: "resign", Token: tok("1"), Invoke: 22 * ms, Complete: 23 * ms, Outcome: OK})
	if c := checkDoneExclusion(p, slack); !c.OK || !strings.Contains(c.Detail, "1 deposed before stepping down") {
		t.Errorf("leader deposed before its Resign not counted apart: %s", c)
	}
	// Without a candidate of a higher priority nothing deposed it.
	p[1].Priority = 0
	if c := checkDoneExclusion(p, slack); c.OK || !strings.Contains(c.Detail, "deposed before it stepped down, with no fault") {
		t.Errorf("leader deposed by nothing not flagged: %s", c)
	}
	// Its Resign began at 15 ms, before w1's term (20 ms), and its Done
	// closed at 25 ms: the Resign's write may have started w1's term
	// before Done closed. A violation, preemption or not.
	p = preempted("released", Op{Process: "w0", Kind: KindRelease, Mode: "resign", Token: tok("1"), Invoke: 15 * ms, Complete: 23 * ms, Outcome: OK})
	if c := checkDoneExclusion(p, slack); c.OK || !strings.Contains(c.Detail, "ended on purpose, after its step-down began") {
		t.Errorf("overlap after a Resign under a preemption not flagged: %s", c)
	}
}

// fakeLeadership is a Leadership whose Done a test closes.
type fakeLeadership struct {
	distlock.Leadership // unused methods
	tok                 distlock.Token
	ctx                 context.Context
	end                 context.CancelCauseFunc
}

func newFakeLeadership(t *testing.T, seq int64) *fakeLeadership {
	ctx, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	return &fakeLeadership{tok: distlock.Token{Name: "l", Seq: seq, Owner: 1}, ctx: ctx, end: cancel}
}

func (f *fakeLeadership) Token() distlock.Token                  { return f.tok }
func (f *fakeLeadership) Done() <-chan struct{}                  { return f.ctx.Done() }
func (f *fakeLeadership) Context() context.Context               { return f.ctx }
func (f *fakeLeadership) Err() error                             { return context.Cause(f.ctx) }
func (f *fakeLeadership) stepDown(how string)                    { f.end(fmt.Errorf("%s: %w", how, distlock.ErrReleased)) }
func (f *fakeLeadership) lose(err error)                         { f.end(fmt.Errorf("%w: %w", distlock.ErrLost, err)) }
func (f *fakeLeadership) String() string                         { return f.tok.String() }
func (f *fakeLeadership) Deadline() (d time.Time)                { return d }
func (f *fakeLeadership) Proclaim(context.Context, string) error { return nil }

func terms(h *History) []Op {
	var out []Op
	for _, op := range h.Ops() {
		if op.Kind == KindTerm {
			out = append(out, op)
		}
	}
	return out
}

func TestTermLog(t *testing.T) {
	h := NewHistory()
	log := newTermLog(h)
	// Stepped down, its hook not run yet when the successor's Campaign
	// returns: closed before the successor's start all the same.
	a := newFakeLeadership(t, 1)
	ra := log.begin("w0", a)
	a.stepDown("handing over")
	b := newFakeLeadership(t, 2)
	rb := log.begin("w1", b)
	log.finish(ra)
	ts := terms(h)
	if len(ts) != 2 || ts[0].Complete == 0 || ts[0].Complete > ts[1].Invoke || ts[0].Mode != "released" {
		t.Fatalf("a step-down before the successor's start recorded as %+v", ts)
	}
	if c := checkDoneExclusion(h.Ops(), 0); !c.OK {
		t.Errorf("clean handoff flagged: %s", c)
	}
	// Still open when the next term's Campaign returns: an overlap,
	// however late it closes.
	c3 := newFakeLeadership(t, 3)
	rc := log.begin("w2", c3)
	b.stepDown("resigned")
	log.finish(rb)
	c3.lose(errors.New("gone"))
	log.finish(rc)
	ts = terms(h)
	if ts[1].Complete <= ts[2].Invoke || ts[2].Mode != "lost" {
		t.Fatalf("an overlap recorded as %+v", ts)
	}
	if c := checkDoneExclusion(h.Ops(), 0); c.OK || c.Violations != 1 || !strings.Contains(c.Detail, "w1 l@2.") {
		t.Errorf("overlap not flagged: %s", c)
	}
	// Still open once the term is over (Resign returned): lingered, a
	// violation though nobody else led meanwhile.
	e := newFakeLeadership(t, 5)
	re := log.begin("w1", e)
	log.finish(re)
	e.stepDown("resigned late")
	log.finish(re)
	if c := checkDoneExclusion(h.Ops(), 0); c.Violations != 2 || !strings.Contains(c.Detail, "1 Done open past its Resign") {
		t.Errorf("a Done open past its Resign not flagged: %s", c)
	}
	// The hook closes a Done nobody looks at.
	d := newFakeLeadership(t, 4)
	log.begin("w0", d)
	d.stepDown("resigned")
	deadline := time.Now().Add(5 * time.Second)
	open := func() int {
		log.mu.Lock()
		defer log.mu.Unlock()
		return len(log.open)
	}
	for open() > 0 || terms(h)[4].Complete == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the Done hook did not close the term")
		}
		time.Sleep(time.Millisecond)
	}
}
