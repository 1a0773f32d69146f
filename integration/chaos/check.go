package chaos

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
)

// registerChecks are the checks of registers regs: linearizable, tokens
// increasing, no stale admission; the unfenced ones' are controls.
func registerChecks(env *Env, ops []Op, regs []*loggedRegister) []Check {
	var out []Check
	for _, r := range regs {
		control := !r.Fenced()
		for _, c := range []Check{
			checkLinearizable(env, ops, r.Name()),
			checkTokensIncrease(r.Name(), r.admitted.sorted()),
			checkNoStale(ops, r.Name()),
		} {
			c.Control = control
			out = append(out, c)
		}
	}
	return out
}

// Check implements Workload: the register checks, then the lock checks.
func (w *RegisterWorkload) Check(env *Env, ops []Op) []Check {
	out := registerChecks(env, ops, w.regs)
	out = append(out, checkLostFirst(ops), checkForcedExpiry(ops))
	return out
}

func limit(lines []string) string {
	if len(lines) > 5 {
		lines = append(lines[:5:5], fmt.Sprintf("... %d more", len(lines)-5))
	}
	return strings.Join(lines, "; ")
}

// rmw is one porcupine operation on a register.
type rmw struct {
	kind   string // "rmw" (read then write applied), "read", "maybe" (write of unknown outcome)
	expect int64
	value  int64
	proc   string
	token  string
}

// registerModel is a register read and written by critical sections: a
// read-modify-write applies only if the register still holds what the
// critical section read; a write of unknown outcome may or may not apply.
var registerModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{int64(0)} },
	Step: func(state, input, _ any) []any {
		s, in := state.(int64), input.(rmw)
		switch in.kind {
		case "rmw":
			if s == in.expect {
				return []any{in.value}
			}
		case "read":
			if s == in.expect {
				return []any{s}
			}
		case "maybe":
			return []any{s, in.value}
		}
		return nil
	},
	DescribeOperation: func(input, _ any) string {
		in := input.(rmw)
		switch in.kind {
		case "rmw":
			return fmt.Sprintf("%s %s: read %d, wrote %d", in.proc, in.token, in.expect, in.value)
		case "read":
			return fmt.Sprintf("%s %s: read %d (write refused or not made)", in.proc, in.token, in.expect)
		}
		return fmt.Sprintf("%s %s: wrote %d (unknown outcome)", in.proc, in.token, in.value)
	},
	DescribeState: func(state any) string { return fmt.Sprint(state) },
}

// checkLinearizable checks that the register's critical sections are
// linearizable with porcupine; on failure it writes the visualization.
func checkLinearizable(env *Env, ops []Op, reg string) Check {
	c := Check{Name: "linearizable", Subject: reg}
	reads := map[int64]Op{}
	writes := map[int64]Op{}
	var end int64
	for _, op := range ops {
		end = max(end, op.Complete)
		if op.Register != reg {
			continue
		}
		switch op.Kind {
		case KindRead:
			if op.Outcome == OK {
				reads[op.CS] = op
			}
		case KindWrite:
			writes[op.CS] = op
		}
	}
	procs := map[string]int{}
	pid := func(p string) int {
		if _, ok := procs[p]; !ok {
			procs[p] = len(procs)
		}
		return procs[p]
	}
	var hist []porcupine.Operation
	for cs, rd := range reads {
		wr, wrote := writes[cs]
		base := rmw{expect: rd.Value, value: wr.Value, proc: rd.Process, token: rd.Token}
		switch {
		case wrote && wr.Outcome == OK:
			base.kind = "rmw"
			hist = append(hist, porcupine.Operation{ClientId: pid(rd.Process), Input: base, Call: rd.Invoke, Return: wr.Complete})
		case wrote && wr.Outcome == Info:
			base.kind = "read"
			hist = append(hist, porcupine.Operation{ClientId: pid(rd.Process), Input: base, Call: rd.Invoke, Return: rd.Complete})
			m := base
			m.kind = "maybe"
			// Unknown: it may apply at any time after it was sent.
			hist = append(hist, porcupine.Operation{ClientId: pid(rd.Process), Input: m, Call: wr.Invoke, Return: end + 1 + int64(len(hist))})
		default:
			base.kind = "read"
			hist = append(hist, porcupine.Operation{ClientId: pid(rd.Process), Input: base, Call: rd.Invoke, Return: rd.Complete})
		}
	}
	c.Checked = len(hist)
	if len(hist) == 0 {
		c.OK, c.Skipped = true, true
		return c
	}
	model := registerModel.ToModel()
	res, info := porcupine.CheckOperationsVerbose(model, hist, time.Minute)
	switch res {
	case porcupine.Ok:
		c.OK = true
		c.Detail = fmt.Sprintf("%d critical sections, %d processes", len(hist), len(procs))
	case porcupine.Unknown:
		c.OK = true
		c.Detail = "porcupine timed out: unknown"
	default:
		c.Violations = 1
		c.Detail = "not linearizable (lost update)"
		if env.Out != "" {
			path := filepath.Join(env.Out, fmt.Sprintf("%s-%s-linearizability.html", sanitize(env.runName), reg))
			if err := porcupine.VisualizePath(model, info, path); err == nil {
				c.Detail += "; visualization: " + path
			}
		}
	}
	return c
}

// checkTokensIncrease checks the register's own order of admitted writes:
// tokens never go back (equal tokens are retries of one acquisition).
func checkTokensIncrease(reg string, adm []Admission) Check {
	c := Check{Name: "tokens-increase", Subject: reg, Checked: len(adm)}
	var bad []string
	for i := 1; i < len(adm); i++ {
		if adm[i].tok.Older(adm[i-1].tok) {
			c.Violations++
			bad = append(bad, fmt.Sprintf("%s admitted after %s", adm[i].Token, adm[i-1].Token))
		}
	}
	c.OK = c.Violations == 0
	c.Detail = limit(bad)
	return c
}

// checkNoStale checks, from the history alone, that no write was admitted
// with a token older than one admitted (read or write) by an operation
// that had completed before the write was invoked.
func checkNoStale(ops []Op, reg string) Check {
	c := Check{Name: "no-stale-admission", Subject: reg}
	type adm struct {
		at  int64
		tok distlock.Token
		s   string
	}
	var admitted []adm
	for _, op := range ops {
		if op.Register == reg && op.Outcome == OK && (op.Kind == KindRead || op.Kind == KindWrite) {
			t, err := distlock.ParseToken(op.Token)
			if err == nil {
				admitted = append(admitted, adm{op.Complete, t, op.Token})
			}
		}
	}
	sort.Slice(admitted, func(i, j int) bool { return admitted[i].at < admitted[j].at })
	var bad []string
	for _, op := range ops {
		if op.Register != reg || op.Kind != KindWrite || op.Outcome != OK {
			continue
		}
		c.Checked++
		t, err := distlock.ParseToken(op.Token)
		if err != nil {
			continue
		}
		for _, a := range admitted {
			if a.at >= op.Invoke {
				break
			}
			if a.tok.Newer(t) {
				c.Violations++
				bad = append(bad, fmt.Sprintf("%s wrote %d with %s after %s was admitted", op.Process, op.Value, op.Token, a.s))
				break
			}
		}
	}
	c.OK = c.Violations == 0
	c.Detail = limit(bad)
	return c
}

// acquisition is one ok acquire with what followed it.
type acquisition struct {
	proc     string
	tok      distlock.Token
	acquired int64 // Lock returned
	invoked  int64
	released int64 // Unlock invoked (MaxInt64 if never)
	lost     int64 // Done fired without Unlock (MaxInt64 if never)
}

func acquisitions(ops []Op) []acquisition {
	var acqs []acquisition
	for i, op := range ops {
		if op.Kind != KindAcquire || op.Outcome != OK {
			continue
		}
		t, err := distlock.ParseToken(op.Token)
		if err != nil {
			continue
		}
		a := acquisition{proc: op.Process, tok: t, acquired: op.Complete, invoked: op.Invoke, released: math.MaxInt64, lost: math.MaxInt64}
		for _, o := range ops[i+1:] {
			if o.Process != op.Process || o.Token != op.Token {
				continue
			}
			if o.Kind == KindRelease && a.released == math.MaxInt64 {
				a.released = o.Invoke
			}
			if o.Kind == KindLost && a.lost == math.MaxInt64 {
				a.lost = o.Invoke
			}
		}
		acqs = append(acqs, a)
	}
	sort.Slice(acqs, func(i, j int) bool { return acqs[i].tok.Older(acqs[j].tok) })
	return acqs
}

// forcedExpiries returns, per process, the times its session was expired
// from outside, or its hold was revoked by force (its entry deleted from
// outside: the revoke nemesis records the tokens it forced, with the time
// it started, and the process is the one that acquired with each), or its
// etcd lease was revoked from outside (etcd-revoke-lease records the
// lease; the processes are those that acquired with it), or, as an
// election's leader, it was forced out by a preemption (addPreempted).
func forcedExpiries(ops []Op) map[string][]int64 {
	m := map[string][]int64{}
	revoked := map[string][]int64{} // token: when forced
	for _, op := range ops {
		if op.Kind != KindFault || op.Outcome != OK {
			continue
		}
		switch op.Fault {
		case NemExpireSession, NemExpireSession + "/expire":
			m[op.Target] = append(m[op.Target], op.Invoke)
		case NemRevoke + "/force":
			for _, t := range strings.Split(op.Token, ",") {
				if t != "" {
					revoked[t] = append(revoked[t], op.Invoke)
				}
			}
		}
	}
	if len(revoked) > 0 {
		for _, op := range ops {
			if op.Kind == KindAcquire && op.Outcome == OK && revoked[op.Token] != nil {
				m[op.Process] = append(m[op.Process], revoked[op.Token]...)
			}
		}
	}
	addRevokedLeases(ops, m)
	addPreempted(ops, m)
	return m
}

// addPreempted adds to forced the election leaders that a preemption may
// have forced out: a candidate of a higher priority, next in line, asks
// the leader to step down and, once the election's preempt grace is over
// (counted from the first such request of the term), deletes its entry
// if the leader has not stepped down; the leader may not know yet (it
// does not follow revocations, or its replies are held, or it is cut
// off) while the preemptor's term begins. The fences decide then. A
// leadership counts as forced out when it did not end by a Resign or
// HandOff that succeeded, and a campaign of a higher priority by another
// process was under way a grace (its own campaign's Grace) or more after
// the first one began (and after this one's campaign began) and before
// this leader learned of its loss (its lost event; its failed release or
// handoff; or never). The time added is the acquisition's completion:
// the whole hold counts as forced.
func addPreempted(ops []Op, forced map[string][]int64) {
	type ending struct {
		clean bool  // a Resign or HandOff that succeeded
		at    int64 // when the leader learned it had ended
	}
	ends := map[string]ending{} // process + token
	for _, o := range ops {
		k := o.Process + " " + o.Token
		switch {
		case o.Kind == KindLost:
			if e, ok := ends[k]; !ok || !e.clean && o.Invoke < e.at {
				ends[k] = ending{at: o.Invoke}
			}
		case o.Kind == KindRelease || o.Kind == KindHandOff && !o.Kept:
			_, ok := ends[k]
			switch {
			case o.Outcome == OK:
				ends[k] = ending{clean: true}
			case !ok:
				ends[k] = ending{at: max(o.Complete, o.Invoke)}
			}
		}
	}
	var camps []Op
	for _, o := range ops {
		if o.Kind == KindAcquire && o.Mode == "leader" {
			camps = append(camps, o)
		}
	}
	for _, op := range camps {
		if op.Outcome != OK || op.Grace <= 0 {
			continue
		}
		end, ok := ends[op.Process+" "+op.Token]
		if ok && end.clean {
			continue
		}
		if !ok || end.at == 0 {
			end.at = math.MaxInt64
		}
		// The first request to step down came at the earliest when a
		// campaign of a higher priority was under way during this
		// leadership's campaign or hold.
		first := int64(math.MaxInt64)
		for _, c := range camps {
			if c.Process != op.Process && c.Priority > op.Priority && c.Invoke < end.at && (c.Complete == 0 || c.Complete > op.Invoke) {
				first = min(first, max(c.Invoke, op.Invoke))
			}
		}
		if first == math.MaxInt64 || first+op.Grace > end.at {
			continue
		}
		// A preemptor under way at the force, a grace after the first
		// request and before the leader learned of its loss.
		for _, c := range camps {
			if c.Process != op.Process && c.Priority > op.Priority && c.Invoke < end.at && (c.Complete == 0 || c.Complete >= first+op.Grace) {
				forced[op.Process] = append(forced[op.Process], op.Complete)
				break
			}
		}
	}
}

// checkLostFirst checks that of two successive holders, the earlier one
// had released or been told "lost" before the later one's Lock returned —
// for holders whose process kept running (not the paused child holders)
// and whose session was not expired from outside.
func checkLostFirst(ops []Op) Check {
	c := Check{Name: "lost-before-successor", Subject: "lock"}
	acqs := acquisitions(ops)
	forced := forcedExpiries(ops)
	var bad []string
	excluded := 0
	for i := 1; i < len(acqs); i++ {
		a, b := acqs[i-1], acqs[i]
		if strings.HasPrefix(a.proc, "holder") {
			excluded++
			continue
		}
		isForced := false
		for _, t := range forced[a.proc] {
			if t >= a.invoked && t <= b.acquired {
				isForced = true
			}
		}
		if isForced {
			excluded++
			continue
		}
		c.Checked++
		if min(a.released, a.lost) > b.acquired {
			c.Violations++
			bad = append(bad, fmt.Sprintf("%s %s still held (no release, no lost) when %s acquired %s at %v", a.proc, a.tok, b.proc, b.tok, time.Duration(b.acquired)))
		}
	}
	c.OK = c.Violations == 0
	c.Detail = limit(append([]string{fmt.Sprintf("%d handoffs, %d excluded (paused child holders, forced expiries)", c.Checked, excluded)}, bad...))
	return c
}

// checkForcedExpiry shows what became of holders whose session was
// expired from outside: the one case where two believe they hold. It
// follows the writes made with the token the expired process held when
// its session was expired: on a fenced register each must have been
// refused, or admitted before any newer token was (no-stale-admission
// checks the latter on every write); on the unfenced control, anything
// goes. A write admitted with that token after a newer one is a violation.
func checkForcedExpiry(ops []Op) Check {
	c := Check{Name: "forced-expiry-fenced", Subject: "lock"}
	forced := forcedExpiries(ops)
	if len(forced) == 0 {
		c.OK, c.Skipped = true, true
		return c
	}
	// The token each expired process held (or was acquiring with) when
	// its session was expired.
	held := map[string]bool{} // token text
	holding := 0
	for proc, times := range forced {
		for _, t := range times {
			last := ""
			for _, op := range ops {
				if op.Process == proc && op.Kind == KindAcquire && op.Outcome == OK && op.Complete <= t {
					last = op.Token
				}
			}
			if last != "" {
				held[last] = true
				holding++
			}
		}
	}
	// newerBefore reports a token newer than t admitted on reg by an
	// operation that completed before at.
	newerBefore := func(reg string, t distlock.Token, at int64) (string, bool) {
		for _, o := range ops {
			if o.Register == reg && o.Outcome == OK && o.Complete < at && (o.Kind == KindRead || o.Kind == KindWrite) {
				if u, err := distlock.ParseToken(o.Token); err == nil && u.Newer(t) {
					return o.Token, true
				}
			}
		}
		return "", false
	}
	refused, early, late, unfenced := 0, 0, 0, 0
	var bad []string
	for _, op := range ops {
		if op.Kind != KindWrite || !held[op.Token] {
			continue
		}
		t, err := distlock.ParseToken(op.Token)
		if err != nil {
			continue
		}
		c.Checked++
		switch {
		case isUnfenced(op.Register):
			unfenced++
		case op.Outcome == Fail:
			refused++
		case op.Outcome == OK:
			if n, ok := newerBefore(op.Register, t, op.Invoke); ok {
				late++
				bad = append(bad, fmt.Sprintf("%s wrote %s with %s after %s", op.Process, op.Register, op.Token, n))
			} else {
				early++
			}
		}
	}
	c.Violations = late
	c.OK = late == 0
	c.Detail = limit(append([]string{fmt.Sprintf("%d forced expiries (%d of a process holding or having held a token); writes with that token: %d refused by fences, %d admitted before any newer token, %d on the unfenced control", len(forced), holding, refused, early, unfenced)}, bad...))
	return c
}

// isUnfenced says whether reg is an unfenced control register
// ("unfenced", or a multi-lock workload's "unfenced-<lock>").
func isUnfenced(reg string) bool { return strings.HasPrefix(reg, "unfenced") }

// checkLiveness checks that after the last fault healed, the lock was
// acquired within bound.
func checkLiveness(env *Env, ops []Op, healed int64, bound time.Duration) Check {
	c := Check{Name: "live-after-heal", Subject: "lock", Timing: true, Checked: 1}
	first := int64(math.MaxInt64)
	for _, op := range ops {
		if op.Kind == KindAcquire && op.Outcome == OK && op.Complete >= healed && op.Complete < first {
			first = op.Complete
		}
	}
	if first == math.MaxInt64 {
		c.Violations = 1
		c.Detail = "no acquisition after the last heal"
		return c
	}
	d := time.Duration(first - healed)
	c.OK = d <= bound
	if !c.OK {
		c.Violations = 1
	}
	c.Detail = fmt.Sprintf("acquired %v after the last heal (bound %v)", d.Round(time.Millisecond), bound)
	return c
}

// checkOrphans checks that no entry was left once every session closed.
func checkOrphans(ops []Op) Check {
	c := Check{Name: "no-orphans", Subject: "lock", Checked: 1}
	for _, op := range ops {
		if op.Kind == KindOrphans {
			c.OK = op.Outcome == OK && op.Value == 0
			if !c.OK {
				c.Violations = int(op.Value)
				c.Detail = fmt.Sprintf("left: %s (%s)", op.Target, op.Error)
			}
		}
	}
	return c
}

// checkFIFO checks, on runs without faults, that the lock was granted in
// queue order: ordered by when Lock returned, tokens (the entries' create
// revisions or czxids, i.e. their queue positions) increase, and no Lock
// gave up.
func checkFIFO(ops []Op) Check {
	c := Check{Name: "fifo", Subject: "lock"}
	var acqs []Op
	var bad []string
	for _, op := range ops {
		if op.Kind != KindAcquire {
			continue
		}
		if op.Outcome != OK {
			if strings.Contains(op.Error, "context canceled") {
				continue // the run ended while it waited
			}
			c.Violations++
			bad = append(bad, fmt.Sprintf("%s: Lock failed: %s", op.Process, op.Error))
			continue
		}
		acqs = append(acqs, op)
	}
	sort.Slice(acqs, func(i, j int) bool { return acqs[i].Complete < acqs[j].Complete })
	c.Checked = len(acqs)
	toks := make([]distlock.Token, len(acqs))
	for i, op := range acqs {
		toks[i], _ = distlock.ParseToken(op.Token)
	}
	// Readers that hold together may return in any order among
	// themselves; anything else returns in token order.
	for i := range acqs {
		for j := i + 1; j < len(acqs); j++ {
			if acqs[i].Mode == acqs[j].Mode && (acqs[i].Mode == "read" || acqs[i].Mode == "permit") {
				// Readers that hold together, or permits granted together,
				// return in any order.
				continue
			}
			if toks[j].Older(toks[i]) {
				c.Violations++
				bad = append(bad, fmt.Sprintf("%s %s acquired after %s %s", acqs[j].Process, acqs[j].Token, acqs[i].Process, acqs[i].Token))
			}
		}
	}
	c.OK = c.Violations == 0
	c.Detail = limit(bad)
	return c
}

// checkFaultsInjected flags every fault the harness could not verify as
// injected (integration.ErrFaultNotVerified; a fault that could not be
// tried at all, e.g. with no leader to kill, is only logged) (a cut the server did not notice, a pause that left the
// process running): a run whose faults did not take effect tested
// nothing, and must not pass as if they had.
func checkFaultsInjected(ops []Op) Check {
	c := Check{Name: "faults-took-effect"}
	var first []string
	for _, op := range ops {
		if op.Kind != KindFault {
			continue
		}
		c.Checked++
		if op.Outcome == Fail && strings.Contains(op.Error, integration.ErrFaultNotVerified.Error()) {
			c.Violations++
			if len(first) < 3 {
				first = append(first, fmt.Sprintf("%s on %s: %s", op.Fault, op.Target, op.Error))
			}
		}
	}
	c.Skipped = c.Checked == 0
	c.OK = c.Violations == 0
	if len(first) > 0 {
		c.Detail = strings.Join(first, "; ")
	}
	return c
}
