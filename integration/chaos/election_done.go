package chaos

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock"
)

// termLog records, for every term of the election workload, the interval
// from its Campaign's return to its Leadership's Done closing, as KindTerm
// operations of the history: every worker of the workload runs in this
// process, so one monotonic clock (History.Now) times them all.
//
// Its mutex orders the two events that matter: a term begins (its
// Campaign returned) and a term's Done is seen closed (by the term's
// context.AfterFunc hook, by a later term's beginning, or by its worker
// once the term is over). A term beginning first looks at every term still
// open: one whose Done has closed is closed now, before the new term's
// start is taken; one whose Done is still open was open after the new
// term's Campaign had returned, and its close, timed under the same
// mutex, comes after the new term's start. So two recorded intervals
// overlap exactly when a Done was still open once another term's Campaign
// had returned: a hook run late by the scheduler never makes an overlap
// of its own. (A Done that closes in the moment between a Campaign's
// return and that term taking the mutex is not seen as an overlap: the
// check errs on the side of passing, never of failing.)
type termLog struct {
	h *History

	mu   sync.Mutex
	open map[*termRec]bool
}

// termRec is one term of termLog.
type termRec struct {
	l      distlock.Leadership
	op     *Op
	closed bool
	// lingered: its Done was still open when its worker's term was over
	// (lead returned, which it does only after a Resign or HandOff
	// returned: either ends the term with Done closed).
	lingered bool
}

func newTermLog(h *History) *termLog { return &termLog{h: h, open: map[*termRec]bool{}} }

// begin records the start of l's term, won by proc: call it as soon as
// Campaign returns.
func (t *termLog) begin(proc string, l distlock.Leadership) *termRec {
	t.mu.Lock()
	defer t.mu.Unlock()
	for r := range t.open {
		select {
		case <-r.l.Done():
			t.closeLocked(r)
		default:
		}
	}
	r := &termRec{l: l}
	r.op = t.h.Record(Op{Process: proc, Kind: KindTerm, Token: l.Token().String(), Invoke: t.h.Now()})
	t.open[r] = true
	context.AfterFunc(l.Context(), func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.closeLocked(r)
	})
	return r
}

// finish marks r's term over for its worker, once its last Resign or
// HandOff returned: Mode then says how the term ended, the loss that may
// have followed a revocation included. A Done still open then (which
// neither may return with) is marked lingered ("lingered>" before its
// Mode) and closed later by the hook.
func (t *termLog) finish(r *termRec) {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-r.l.Done():
		t.closeLocked(r)
	default:
		r.lingered = true
		t.h.Update(r.op, func(o *Op) { o.Mode = "lingered>open" })
		return
	}
	t.h.Update(r.op, func(o *Op) { o.Mode = r.mode() })
}

// mode is r's Mode once its Done closed.
func (r *termRec) mode() string {
	m := termEnd(context.Cause(r.l.Context()), r.l.Err())
	if r.lingered {
		m = "lingered>" + m
	}
	return m
}

func (t *termLog) closeLocked(r *termRec) {
	if r.closed {
		return
	}
	r.closed = true
	delete(t.open, r)
	mode := r.mode()
	t.h.Update(r.op, func(o *Op) { o.Mode = mode })
	t.h.Complete(r.op, OK, context.Cause(r.l.Context()))
}

// endClass names what an error of a Leadership says about its end.
func endClass(err error) string {
	switch {
	case err == nil:
		return "open"
	case errors.Is(err, distlock.ErrSessionExpired):
		return "expired"
	case errors.Is(err, distlock.ErrEntryGone):
		return "entry-gone"
	case errors.Is(err, distlock.ErrLost):
		return "lost"
	case errors.Is(err, distlock.ErrRevoked):
		return "revoked"
	case errors.Is(err, distlock.ErrReleased):
		return "released"
	}
	return "other"
}

// termEnd is a KindTerm's Mode: the class of Done's cause, and, if its
// Err says something else since, ">" and that (a revocation followed by
// a loss: "revoked>entry-gone"; a step-down whose delete found the entry
// gone: "released>lost").
func termEnd(cause, err error) string {
	a, b := endClass(cause), endClass(err)
	if b == a || err == nil {
		return a
	}
	return a + ">" + b
}

// termLoss says whether a term's Mode says it ended by a loss (its
// session expired, its entry deleted by someone else, lost), at Done or
// after a revocation.
func termLoss(mode string) bool {
	for _, m := range strings.Split(mode, ">") {
		switch m {
		case "expired", "entry-gone", "lost":
			return true
		}
	}
	return false
}

// checkDoneExclusion checks the contract of Leadership.Done across the
// election's workers: a leader's Done closes before the write that can
// start another term is sent (Resign, HandOff, a revoked leader handing
// over), so at most one term's Done is open at any instant. It sweeps the
// KindTerm intervals (termLog) and classifies every overlap by the older
// term's end:
//
//   - forced, counted apart: the older term's process was forced out
//     inside its term by a nemesis (session expired, entry force-revoked,
//     lease revoked: forcedExpiries) or by a preemption (addPreempted),
//     from its campaign to the newer term's start; or it ended by a loss
//     (session expired, entry gone, lost) while a fault was active (from
//     slack before its campaign to the newer term's start); or the newer
//     term began before the older leader had even begun to step down (its
//     first Resign, or HandOff that did not keep it leading), so that no
//     write of its own can have started it: it was deposed, by a
//     preemption (a candidate of a higher priority had been campaigning
//     for its election's grace) or during a fault — whatever its Resign
//     said afterwards (a leader cut off that resigns once deposed may be
//     told it resigned: its handoff's answer lost, the delete finds
//     nothing);
//   - a violation otherwise: it ended on purpose (Done's cause matches
//     distlock.ErrReleased: Resign, HandOff; or a revocation it then
//     stepped down from, with no loss after) and the newer term began
//     after its step-down was invoked; it was deposed before its
//     step-down with no preemption or fault to explain it; it ended by a
//     loss that no fault or preemption explains; or its Done never
//     closed.
//
// A term whose Done was still open once its worker's Resign or HandOff
// had returned (Mode "lingered>...") is a violation too, overlap or not.
func checkDoneExclusion(ops []Op, slack time.Duration) Check {
	c := Check{Name: "done-exclusion", Subject: "election"}
	var terms, faults, leaders []Op
	camps := map[string]Op{}     // process + token: the won campaign
	stepAt := map[string]int64{} // process + token: its first step-down invoked
	for _, op := range ops {
		k := op.Process + " " + op.Token
		switch {
		case op.Kind == KindTerm:
			terms = append(terms, op)
		case op.Kind == KindAcquire && op.Mode == "leader":
			leaders = append(leaders, op)
			if op.Outcome == OK {
				camps[k] = op
			}
		case op.Kind == KindFault && op.Fault != "healed-all":
			faults = append(faults, op)
		case op.Kind == KindRelease || op.Kind == KindHandOff && !op.Kept:
			if t, ok := stepAt[k]; !ok || op.Invoke < t {
				stepAt[k] = op.Invoke
			}
		}
	}
	c.Checked = len(terms)
	if len(terms) == 0 {
		c.OK, c.Skipped = true, true
		return c
	}
	sort.SliceStable(terms, func(i, j int) bool { return terms[i].Invoke < terms[j].Invoke })
	end := func(t Op) int64 {
		if t.Complete == 0 {
			return math.MaxInt64
		}
		return t.Complete
	}
	forced := forcedExpiries(ops)
	preempted := map[string][]int64{}
	addPreempted(ops, preempted)
	within := func(ts []int64, from, to int64) bool {
		for _, t := range ts {
			if t >= from && t <= to {
				return true
			}
		}
		return false
	}
	faultIn := func(from, to int64) string {
		for _, f := range faults {
			fe := f.Complete
			if fe == 0 {
				fe = math.MaxInt64
			}
			if f.Invoke <= to && fe >= from {
				return f.Fault
			}
		}
		return ""
	}
	// preemptible says whether camp's leader may have been forced out by
	// a preemption by until: a candidate of a higher priority, of another
	// process, was under way a grace after the first such began (and
	// after camp began), before until.
	preemptible := func(camp Op, until int64) bool {
		if camp.Grace <= 0 {
			return false
		}
		first := int64(math.MaxInt64)
		for _, o := range leaders {
			if o.Process != camp.Process && o.Priority > camp.Priority && o.Invoke < until && (o.Complete == 0 || o.Complete > camp.Invoke) {
				first = min(first, max(o.Invoke, camp.Invoke))
			}
		}
		if first == math.MaxInt64 || first+camp.Grace > until {
			return false
		}
		for _, o := range leaders {
			if o.Process != camp.Process && o.Priority > camp.Priority && o.Invoke < until && (o.Complete == 0 || o.Complete >= first+camp.Grace) {
				return true
			}
		}
		return false
	}
	at := func(t int64) string {
		if t == math.MaxInt64 {
			return "never"
		}
		return time.Duration(t).Round(time.Microsecond).String()
	}
	describe := func(t Op) string {
		cause := t.Error
		if len(cause) > 160 {
			cause = cause[:160] + "…"
		}
		step := ""
		if s, ok := stepAt[t.Process+" "+t.Token]; ok {
			step = ", stepping down from " + at(s)
		}
		return fmt.Sprintf("%s %s (campaign returned %s%s, Done closed %s, %s: %q)", t.Process, t.Token, at(t.Invoke), step, at(end(t)), t.Mode, cause)
	}
	inOverlap := make([]bool, len(terms))
	byPreempt, byNemesis, byFault, deposed := 0, 0, 0, 0
	var bad, apart []string
	for j, b := range terms {
		for i, a := range terms[:j] {
			if end(a) <= b.Invoke {
				continue
			}
			inOverlap[i], inOverlap[j] = true, true
			k := a.Process + " " + a.Token
			camp, hasCamp := camps[k]
			from := a.Invoke
			if hasCamp {
				from = min(from, camp.Invoke)
			}
			step, stepped := stepAt[k]
			early := !stepped || b.Invoke < step // b began before a stepped down
			why := ""
			switch f := faultIn(from-int64(slack), b.Invoke); {
			case within(preempted[a.Process], from, b.Invoke):
				byPreempt++
				why = "forced out by a preemption"
			case within(forced[a.Process], from, b.Invoke):
				byNemesis++
				why = "forced out by a nemesis"
			case termLoss(a.Mode) && f != "":
				byFault++
				why = "lost during " + f
			case early && a.Complete != 0 && hasCamp && preemptible(camp, b.Invoke):
				deposed++
				why = "deposed by a preemption before it stepped down"
			case early && a.Complete != 0 && f != "":
				deposed++
				why = "deposed during " + f + " before it stepped down"
			}
			if why != "" {
				apart = append(apart, fmt.Sprintf("apart (%s): %s still open when %s %s's campaign returned at %s", why, describe(a), b.Process, b.Token, at(b.Invoke)))
				continue
			}
			what := "ended on purpose, after its step-down began"
			switch {
			case a.Complete == 0:
				what = "never closed"
			case termLoss(a.Mode):
				what = "lost, with no fault or preemption to explain it"
			case early:
				what = "deposed before it stepped down, with no fault or preemption to explain it"
			case !strings.HasPrefix(strings.TrimPrefix(a.Mode, "lingered>"), "released") && !strings.HasPrefix(strings.TrimPrefix(a.Mode, "lingered>"), "revoked"):
				what = "ended (" + a.Mode + ")"
			}
			c.Violations++
			bad = append(bad, fmt.Sprintf("%s: %s was still open when %s's campaign returned at %s (for %v more); newer: %s",
				what, describe(a), b.Process, at(b.Invoke), time.Duration(end(a)-b.Invoke).Round(time.Microsecond), describe(b)))
		}
	}
	lingered := 0
	for _, t := range terms {
		if strings.HasPrefix(t.Mode, "lingered>") {
			lingered++
			c.Violations++
			bad = append(bad, fmt.Sprintf("Done still open when its worker's Resign or HandOff had returned: %s", describe(t)))
		}
	}
	clean := 0
	for _, o := range inOverlap {
		if !o {
			clean++
		}
	}
	if len(apart) > 2 {
		apart = apart[:2]
	}
	c.OK = c.Violations == 0
	c.Detail = limit(append(append([]string{fmt.Sprintf("%d terms, %d clean (in no overlap); %d overlaps counted apart (%d forced by a preemption, %d by a nemesis, %d losses during a fault, %d deposed before stepping down); %d violations (%d Done open past its Resign or HandOff)",
		len(terms), clean, byPreempt+byNemesis+byFault+deposed, byPreempt, byNemesis, byFault, deposed, c.Violations, lingered)}, bad...), apart...))
	return c
}
