package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
)

// electionTopPriority is worker 0's campaign priority, always; the other
// workers draw theirs from 0..electionTopPriority at each campaign.
const electionTopPriority = 3

// electionGrace is the election workload's preempt grace
// (distlock.WithPreemptGrace) on a store of session TTL ttl: short, so
// that runs of a few seconds see leaders forced out.
func electionGrace(ttl time.Duration) time.Duration { return min(ttl/4, time.Second) }

// ElectionWorkload is the election workload. Every worker campaigns with
// its process name ("w1") as value, with a priority (worker 0 always
// electionTopPriority, the others one drawn from 0..electionTopPriority),
// on sessions of which three in four are revocable, in an election whose
// preempt grace is short (electionGrace). Leading, it reads three
// registers with its term's token and writes them back plus one — fenced
// in memory, fenced in the store, and unfenced (the control), as the
// register workload does — and ends its term, drawn at random: by Resign;
// by HandOff to the next in line; by HandOff to a named worker (maybe
// itself, or one not campaigning: distlock.ErrNoCandidate must leave it
// leading, and it then resigns); or by holding until it is preempted —
// when a candidate of a higher priority asks it to step down (its Done
// closes with a *distlock.RevokedError) it hands off, or, one time in
// three, it is stubborn: it reads at the start of its term, ignores the
// request until the preemptor forces it out, and then writes what it read
// plus one with its stale token once a successor has written (the fences
// must refuse it; the control loses an update). Every worker also
// observes the election for the whole run.
//
// Checked: the register checks (the unfenced control is reported, not
// asserted); at most one leader at a time outside forced expiries
// (sessions expired or leases revoked from outside, forced revocations,
// and leaders a preemption may have forced out: see addPreempted); at
// most one term's Done open at any instant, each term timed in this
// process from its Campaign's return to its Done's close (termLog; an
// overlap after a forced end is counted apart, one after a Resign, a
// HandOff or a revocation stepped down from is a violation: see
// checkDoneExclusion); one leader per term; terms' tokens strictly increase by real time; every handoff
// returned a newer term, of the candidate asked for, equal to the token
// the successor's Campaign returned; every observer saw terms strictly in
// order, never a term twice with another report between, and no "no
// leader" between a handoff's two terms; and what became of the writes of
// leaders forced out.
type ElectionWorkload struct {
	regs  []*loggedRegister
	cs    atomic.Int64 // critical section numbers
	grace time.Duration
	terms *termLog // every term's Done interval

	stallPoint
	successors
}

// Name implements Workload.
func (w *ElectionWorkload) Name() string { return "election" }

// Setup implements Workload.
func (w *ElectionWorkload) Setup(ctx context.Context, env *Env) error {
	mem, err := newMemRegister(env.Lock)
	if err != nil {
		return err
	}
	store, err := env.Clients[0].Register(ctx, fmt.Sprintf("election-store-%d", time.Now().UnixNano()), env.Lock)
	if err != nil {
		return fmt.Errorf("chaos: store register: %w", err)
	}
	w.regs = []*loggedRegister{{Register: mem}, {Register: named{store, "store"}}, {Register: &unfencedRegister{}}}
	w.grace = electionGrace(env.Store.TTL())
	w.terms = newTermLog(env.History)
	w.resetSuccessors()
	w.reset()
	return nil
}

// Close implements Workload.
func (w *ElectionWorkload) Close() error { return nil }

// WaitSuccessor waits until a term with a token newer than t wrote every
// register, or ctx ends (staller).
func (w *ElectionWorkload) WaitSuccessor(ctx context.Context, t distlock.Token) bool {
	return w.waitNewer(ctx, t)
}

// electionPriority is worker i's priority for its next campaign.
func electionPriority(env *Env, i int) int {
	if i == 0 {
		return electionTopPriority
	}
	return workerIntN(env, electionTopPriority+1)
}

// Worker implements Workload.
func (w *ElectionWorkload) Worker(ctx context.Context, env *Env, i int) {
	proc := fmt.Sprintf("w%d", i)
	observing := false
	revocable := func() []SessionOption {
		if workerIntN(env, 4) == 0 {
			return nil // learns of a preemption only when forced out
		}
		return []SessionOption{Revocable()}
	}
	sessionLoopWith(ctx, env, i, revocable, func(s Session) {
		el, err := s.Election(env.Lock, distlock.WithPreemptGrace(w.grace))
		if err != nil {
			env.Log.Error("chaos: election", "err", err)
			return
		}
		if !observing {
			// One observer per worker, for the whole run: it reads
			// through the connection and outlives the session.
			observing = true
			ch := el.Observe(ctx)
			go func() {
				for li := range ch {
					env.History.Event(Op{Process: "o" + proc[1:], Kind: KindObserve, Token: tokenText(li.Token), Leader: li.Value, Outcome: OK})
				}
			}()
		}
		prio := electionPriority(env, i)
		op := env.History.Invoke(Op{Process: proc, Kind: KindAcquire, Mode: "leader", Priority: prio, Grace: int64(w.grace)})
		cctx, cancel := context.WithTimeout(ctx, 4*env.Store.TTL())
		l, err := el.Campaign(cctx, proc, distlock.WithPriority(prio))
		if err != nil {
			cancel()
			env.History.Complete(op, Fail, err)
			return
		}
		// First of all: every other term's Done must be closed by now.
		term := w.terms.begin(proc, l)
		defer w.terms.finish(term)
		cancel()
		env.History.Update(op, func(o *Op) { o.Token = l.Token().String() })
		env.History.Complete(op, OK, nil)
		env.SetHolder(i)
		w.lead(ctx, env, i, proc, prio, l)
		env.SetHolder(-1)
	})
}

// lead is one term of worker i: its critical section, and its end.
func (w *ElectionWorkload) lead(ctx context.Context, env *Env, i int, proc string, prio int, l distlock.Leadership) {
	tok := l.Token()
	lw := watchLeadership(env, proc, l)
	defer lw.stop()

	if resume := w.take(i, tok, nil); resume != nil {
		// A nemesis asked this worker to stall between its reads and its
		// writes while it expires its session or revokes it: it then
		// writes after its successor.
		reads := w.readAll(env, proc, tok)
		select {
		case <-resume:
		case <-time.After(10 * env.Store.TTL()):
		}
		w.writeAll(env, proc, tok, reads)
		w.resign(env, proc, l)
		return
	}
	switch workerIntN(env, 4) {
	case 0:
		w.term(env, proc, tok)
		w.resign(env, proc, l)
	case 1:
		w.term(env, proc, tok)
		w.handOffOrResign(env, proc, l, "")
	case 2:
		w.term(env, proc, tok)
		// Any worker, itself included, waiting or not.
		w.handOffOrResign(env, proc, l, fmt.Sprintf("w%d", workerIntN(env, len(env.Clients))))
	default:
		w.holdUntilPreempted(ctx, env, proc, prio, l, lw)
	}
}

// term is a term's critical section: read every register, write it back
// plus one, and lead a moment.
func (w *ElectionWorkload) term(env *Env, proc string, tok distlock.Token) {
	w.writeAll(env, proc, tok, w.readAll(env, proc, tok))
	time.Sleep(env.WorkerRand(time.Millisecond, 20*time.Millisecond))
}

// holdUntilPreempted leads until a candidate of a higher priority asks
// this leader to step down (then it hands off to the next in line), it
// loses its leadership, or a while passes (then it resigns; a moment for
// a leader of the top priority, whom nobody preempts). One time in
// three it is stubborn: it reads at the start of its term, ignores a
// request to step down until it is forced out (or the grace and a TTL
// have passed), and then writes what it read plus one: with its stale
// token after a successor's writes if it was deposed.
func (w *ElectionWorkload) holdUntilPreempted(ctx context.Context, env *Env, proc string, prio int, l distlock.Leadership, lw *leaderWatch) {
	tok := l.Token()
	stubborn := workerIntN(env, 3) == 0
	reads := w.readAll(env, proc, tok)
	if !stubborn {
		w.writeAll(env, proc, tok, reads)
		reads = nil
	}
	d := env.WorkerRand(w.grace/4, 2*w.grace)
	if prio >= electionTopPriority {
		d = env.WorkerRand(time.Millisecond, 50*time.Millisecond)
	}
	wait := time.NewTimer(d)
	defer wait.Stop()
	select {
	case <-lw.revoked:
		if !stubborn {
			w.handOffOrResign(env, proc, l, "")
			return
		}
		force := time.NewTimer(w.grace + env.Store.TTL())
		defer force.Stop()
		select {
		case <-lw.lost:
		case <-force.C:
		case <-ctx.Done():
		}
	case <-lw.lost:
	case <-wait.C:
	case <-ctx.Done():
	}
	if reads != nil {
		select {
		case <-lw.lost:
			// Deposed: write once a successor has (the fences must
			// refuse it).
			wctx, cancel := context.WithTimeout(ctx, 4*env.Store.TTL())
			w.WaitSuccessor(wctx, tok)
			cancel()
		default:
		}
		w.writeAll(env, proc, tok, reads)
	}
	w.resign(env, proc, l)
}

// termRead is what a term read of one register.
type termRead struct{ cs, v int64 }

// readAll reads every register with tok.
func (w *ElectionWorkload) readAll(env *Env, proc string, tok distlock.Token) map[string]termRead {
	h := env.History
	ctx, cancel := context.WithTimeout(context.Background(), 2*env.Store.TTL())
	defer cancel()
	reads := map[string]termRead{}
	for _, r := range w.regs {
		cs := w.cs.Add(1)
		op := h.Invoke(Op{Process: proc, Kind: KindRead, Register: r.Name(), Token: tok.String(), CS: cs})
		v, err := r.Read(ctx, tok)
		h.Update(op, func(o *Op) { o.Value = v })
		h.Complete(op, outcomeOf(err), err)
		if err == nil {
			reads[r.Name()] = termRead{cs, v}
		}
	}
	return reads
}

// writeAll writes every register read plus one with tok.
func (w *ElectionWorkload) writeAll(env *Env, proc string, tok distlock.Token, reads map[string]termRead) {
	h := env.History
	ctx, cancel := context.WithTimeout(context.Background(), 2*env.Store.TTL())
	defer cancel()
	for _, r := range w.regs {
		x, ok := reads[r.Name()]
		if !ok {
			continue
		}
		op := h.Invoke(Op{Process: proc, Kind: KindWrite, Register: r.Name(), Token: tok.String(), CS: x.cs, Value: x.v + 1})
		order, err := r.Write(ctx, tok, x.v+1)
		h.Update(op, func(o *Op) { o.Order = order })
		h.Complete(op, outcomeOf(err), err)
		if err == nil {
			w.noteWrite(r.Name(), tok)
		}
	}
}

// leaderOutcome classifies the error of a Resign or HandOff: the term
// certainly did not end by it (it had ended before), or unknown.
func leaderOutcome(err error) Outcome {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, distlock.ErrNotLeader), errors.Is(err, distlock.ErrLost), errors.Is(err, distlock.ErrSessionExpired), errors.Is(err, distlock.ErrNoCandidate):
		return Fail
	}
	return Info
}

// resign ends the term by Resign, recorded as a release of mode "resign".
func (w *ElectionWorkload) resign(env *Env, proc string, l distlock.Leadership) {
	op := env.History.Invoke(Op{Process: proc, Kind: KindRelease, Mode: "resign", Token: l.Token().String()})
	ctx, cancel := context.WithTimeout(context.Background(), 2*env.Store.TTL())
	err := l.Resign(ctx)
	cancel()
	env.History.Complete(op, leaderOutcome(err), err)
}

// handOffOrResign hands leadership off to the candidate of value to (the
// next in line if ""), and resigns if that did not certainly happen (no
// such candidate: the leader kept leading; or no answer).
func (w *ElectionWorkload) handOffOrResign(env *Env, proc string, l distlock.Leadership, to string) {
	mode := "next"
	if to != "" {
		mode = "named"
	}
	op := env.History.Invoke(Op{Process: proc, Kind: KindHandOff, Mode: mode, Token: l.Token().String(), To: to})
	ctx, cancel := context.WithTimeout(context.Background(), 2*env.Store.TTL())
	li, err := l.HandOff(ctx, to)
	cancel()
	env.History.Update(op, func(o *Op) {
		if err == nil {
			o.Next, o.Leader = tokenText(li.Token), li.Value
		}
		o.Kept = errors.Is(err, distlock.ErrNoCandidate)
	})
	env.History.Complete(op, leaderOutcome(err), err)
	if err != nil {
		w.resign(env, proc, l)
	}
}

// leaderWatch follows one Leadership for its worker: revoked is closed
// when it is asked to step down (Done with a *distlock.RevokedError),
// lost when it is lost (Err says a loss, also after a revocation). Each
// is recorded as an event (KindRevoked, KindLost; a loss that says the
// entry was deleted by someone else has Fault faultEntryGone).
type leaderWatch struct {
	revoked, lost chan struct{}
	over, done    chan struct{}
}

func watchLeadership(env *Env, proc string, l distlock.Leadership) *leaderWatch {
	lw := &leaderWatch{revoked: make(chan struct{}), lost: make(chan struct{}), over: make(chan struct{}), done: make(chan struct{})}
	tok := l.Token().String()
	go func() {
		defer close(lw.done)
		select {
		case <-l.Done():
		case <-lw.over:
		}
		err := l.Err()
		if errors.Is(err, distlock.ErrRevoked) {
			env.History.Event(Op{Process: proc, Kind: KindRevoked, Mode: "leader", Token: tok, Outcome: OK, Error: err.Error()})
			close(lw.revoked)
			// A revoked leader leads on until it hands off, resigns or
			// is forced out; Err then goes on to the loss, if one comes
			// (Done, closed already, says no more).
			t := time.NewTicker(5 * time.Millisecond)
			defer t.Stop()
			for errors.Is(err, distlock.ErrRevoked) {
				select {
				case <-lw.over:
					if err = l.Err(); errors.Is(err, distlock.ErrRevoked) {
						return // ended by its own handoff or resignation
					}
				case <-t.C:
					err = l.Err()
				}
			}
		}
		if err == nil || errors.Is(err, distlock.ErrReleased) {
			return
		}
		op := Op{Process: proc, Kind: KindLost, Mode: "leader", Token: tok, Outcome: OK, Error: err.Error()}
		if errors.Is(err, distlock.ErrEntryGone) {
			op.Fault = faultEntryGone
		}
		env.History.Event(op)
		close(lw.lost)
	}()
	return lw
}

// stop ends the watch once the term is over.
func (lw *leaderWatch) stop() {
	close(lw.over)
	<-lw.done
}

// Check implements Workload.
func (w *ElectionWorkload) Check(env *Env, ops []Op) []Check {
	return append(registerChecks(env, ops, w.regs),
		checkExclusion(ops, "election"),
		checkDoneExclusion(ops, 2*env.Store.TTL()),
		checkOneLeaderPerTerm(ops),
		checkTermsIncrease(ops),
		checkHandOffs(ops),
		checkObserveOrder(ops),
		checkForcedExpiry(ops),
	)
}

// checkOneLeaderPerTerm checks that no token was won by two campaigns.
func checkOneLeaderPerTerm(ops []Op) Check {
	c := Check{Name: "one-leader-per-term", Subject: "election"}
	by := map[string]string{}
	var bad []string
	for _, op := range ops {
		if op.Kind != KindAcquire || op.Outcome != OK {
			continue
		}
		c.Checked++
		if p, ok := by[op.Token]; ok {
			c.Violations++
			bad = append(bad, fmt.Sprintf("%s won by %s and %s", op.Token, p, op.Process))
		}
		by[op.Token] = op.Process
	}
	c.OK = c.Violations == 0
	c.Detail = limit(bad)
	return c
}

// won is a won campaign, its token parsed.
type won struct {
	proc             string
	tok              distlock.Token
	invoke, complete int64
}

func wonCampaigns(ops []Op) []won {
	var out []won
	for _, op := range ops {
		if op.Kind != KindAcquire || op.Outcome != OK || op.Mode != "leader" {
			continue
		}
		if t, err := distlock.ParseToken(op.Token); err == nil {
			out = append(out, won{op.Process, t, op.Invoke, op.Complete})
		}
	}
	return out
}

// checkTermsIncrease checks that terms' tokens strictly increase from
// leader to leader, by real time, two ways. Every won campaign: one
// invoked after another had returned holds a newer term (its term began
// with a write made after its own entry, so after the other's term
// began), forced expiries included. And the leaderships the exclusion
// check keeps (not forced out), in the order they began: each has a
// newer term than the one before.
func checkTermsIncrease(ops []Op) Check {
	c := Check{Name: "terms-increase", Subject: "election"}
	ws := wonCampaigns(ops)
	byInvoke := append([]won(nil), ws...)
	sort.Slice(byInvoke, func(i, j int) bool { return byInvoke[i].invoke < byInvoke[j].invoke })
	byComplete := append([]won(nil), ws...)
	sort.Slice(byComplete, func(i, j int) bool { return byComplete[i].complete < byComplete[j].complete })
	var bad []string
	newest, k := -1, 0 // newest term among the campaigns returned so far
	for _, b := range byInvoke {
		for ; k < len(byComplete) && byComplete[k].complete < b.invoke; k++ {
			if newest < 0 || byComplete[k].tok.Newer(byComplete[newest].tok) {
				newest = k
			}
		}
		c.Checked++
		if newest >= 0 && !b.tok.Newer(byComplete[newest].tok) {
			a := byComplete[newest]
			c.Violations++
			bad = append(bad, fmt.Sprintf("%s won %s in a campaign begun at %v, after %s had won %s at %v",
				b.proc, b.tok, time.Duration(b.invoke), a.proc, a.tok, time.Duration(a.complete)))
		}
	}
	holds, excluded := holdsOf(ops, func(op Op) bool { return op.Mode == "leader" })
	for i := 1; i < len(holds); i++ {
		a, b := holds[i-1], holds[i]
		ta, err1 := distlock.ParseToken(a.tok)
		tb, err2 := distlock.ParseToken(b.tok)
		if err1 != nil || err2 != nil {
			continue
		}
		c.Checked++
		if !tb.Newer(ta) {
			c.Violations++
			bad = append(bad, fmt.Sprintf("%s %s began leading at %v, after %s %s (began %v)", b.proc, b.tok, time.Duration(b.from), a.proc, a.tok, time.Duration(a.from)))
		}
	}
	c.OK = c.Violations == 0
	c.Detail = limit(append([]string{fmt.Sprintf("%d campaigns won, %d successions (%d leaderships forced out left out)", len(ws), max(len(holds)-1, 0), excluded)}, bad...))
	return c
}

// checkHandOffs checks every handoff that returned a successor: its term
// is newer than the leader's, it is the candidate asked for (when one
// was), not the leader itself, and it is the term that candidate's
// Campaign returned, after the handoff was made. A handoff whose
// successor's Campaign gave up as it won (its context ended) cannot be
// matched: counted, not a violation.
func checkHandOffs(ops []Op) Check {
	c := Check{Name: "handoff-token", Subject: "election"}
	bySeq := map[int64]Op{} // won campaigns by their term's number
	var camps []Op          // every campaign, won or not
	for _, op := range ops {
		if op.Kind != KindAcquire || op.Mode != "leader" {
			continue
		}
		camps = append(camps, op)
		if t, err := distlock.ParseToken(op.Token); err == nil && op.Outcome == OK {
			bySeq[t.Seq] = op
		}
	}
	var bad []string
	flag := func(f string, args ...any) {
		c.Violations++
		bad = append(bad, fmt.Sprintf(f, args...))
	}
	kept, failed, unknown, unmatched, named := 0, 0, 0, 0, 0
	for _, h := range ops {
		if h.Kind != KindHandOff {
			continue
		}
		switch {
		case h.Outcome == OK:
		case h.Kept:
			kept++
			continue
		case h.Outcome == Fail:
			failed++
			continue
		default:
			unknown++
			continue
		}
		c.Checked++
		if h.To != "" {
			named++
		}
		from, err1 := distlock.ParseToken(h.Token)
		next, err2 := distlock.ParseToken(h.Next)
		if err1 != nil || err2 != nil {
			flag("%s handed %s off to %q: tokens do not parse (%v, %v)", h.Process, h.Token, h.Next, err1, err2)
			continue
		}
		if !next.Newer(from) {
			flag("%s handed %s off to %s %s: not a newer term", h.Process, h.Token, h.Leader, h.Next)
		}
		if h.To != "" && h.Leader != h.To {
			flag("%s handed %s off to %s (%s), asked for %s", h.Process, h.Token, h.Leader, h.Next, h.To)
		}
		if h.Leader == h.Process {
			flag("%s handed %s off to itself (%s)", h.Process, h.Token, h.Next)
		}
		if a, ok := bySeq[next.Seq]; ok {
			if a.Process != h.Leader || a.Token != h.Next {
				flag("%s handed %s off to %s %s, but %s won that term (%s)", h.Process, h.Token, h.Leader, h.Next, a.Process, a.Token)
			}
			if a.Complete < h.Invoke {
				flag("%s won %s at %v, before %s handed off to it at %v", a.Process, a.Token, time.Duration(a.Complete), h.Process, time.Duration(h.Invoke))
			}
			continue
		}
		// No campaign returned that term: the successor's campaign
		// under way at the handoff gave up as it won, or returned
		// another term.
		var other *Op
		gaveUp := false
		for i := range camps {
			a := &camps[i]
			if a.Process != h.Leader || a.Invoke >= h.Complete || a.Complete != 0 && a.Complete <= h.Invoke {
				continue
			}
			if a.Outcome != OK {
				gaveUp = true
			} else if other == nil {
				other = a
			}
		}
		switch {
		case gaveUp || other == nil:
			unmatched++
		default:
			flag("%s handed %s off to %s %s, but %s's campaign under way returned %s", h.Process, h.Token, h.Leader, h.Next, other.Process, other.Token)
		}
	}
	c.OK = c.Violations == 0
	c.Detail = limit(append([]string{fmt.Sprintf("%d handoffs (%d to a named candidate), %d kept (no such candidate), %d failed (not leader), %d unknown, %d successors not in the history",
		c.Checked, named, kept, failed, unknown, unmatched)}, bad...))
	return c
}

// checkObserveOrder checks that every observer saw terms strictly in
// order: a token never goes back, and a term seen again after another
// report (another term, or "no leader") is a violation (Observe sends
// consecutive equal values once); that no observer saw "no leader"
// between the two terms of a handoff (one write ends one and begins the
// other); and counts the leaders seen that no campaign in the history
// won.
func checkObserveOrder(ops []Op) Check {
	c := Check{Name: "observe-order", Subject: "election"}
	won := map[string]bool{}
	for _, op := range ops {
		if op.Kind == KindAcquire && op.Outcome == OK {
			won[op.Token] = true
		}
	}
	last := map[string]distlock.Token{}
	reports := map[string][]string{} // per observer, in order ("" for none)
	var bad []string
	unknown := 0
	for _, op := range ops {
		if op.Kind != KindObserve {
			continue
		}
		prev := reports[op.Process]
		reports[op.Process] = append(prev, op.Token)
		if op.Token == "" {
			continue
		}
		c.Checked++
		t, err := distlock.ParseToken(op.Token)
		if err != nil {
			continue
		}
		l, seen := last[op.Process]
		switch {
		case seen && t.Older(l):
			c.Violations++
			bad = append(bad, fmt.Sprintf("%s saw %s after %s", op.Process, t, l))
		case seen && !t.Newer(l) && (len(prev) == 0 || prev[len(prev)-1] != op.Token):
			c.Violations++
			bad = append(bad, fmt.Sprintf("%s saw %s again, after %q", op.Process, t, prev[len(prev)-1]))
		}
		if !seen || t.Newer(l) {
			last[op.Process] = t
		}
		if !won[op.Token] {
			// A campaign that won but whose caller gave up (its context
			// ended as it won) is reported by Observe without a win in
			// the history: counted, not a violation.
			unknown++
		}
	}
	// No "no leader" between a handoff's two terms.
	at := map[string]map[string]int{} // observer: token: index of its first report
	for o, rs := range reports {
		at[o] = map[string]int{}
		for i, r := range rs {
			if _, ok := at[o][r]; !ok && r != "" {
				at[o][r] = i
			}
		}
	}
	handoffs := 0
	for _, h := range ops {
		if h.Kind != KindHandOff || h.Outcome != OK {
			continue
		}
		handoffs++
		for o, rs := range reports {
			i, ok1 := at[o][h.Token]
			j, ok2 := at[o][h.Next]
			if !ok1 || !ok2 || j < i {
				continue
			}
			for _, r := range rs[i+1 : j] {
				if r == "" {
					c.Violations++
					bad = append(bad, fmt.Sprintf("%s saw no leader between %s and %s, handed off by %s in one write", o, h.Token, h.Next, h.Process))
					break
				}
			}
		}
	}
	c.OK = c.Violations == 0
	c.Detail = limit(append([]string{fmt.Sprintf("%d observations of %d observers, %d of leaders not in the history, %d handoffs followed", c.Checked, len(reports), unknown, handoffs)}, bad...))
	if c.Checked == 0 {
		c.Skipped = true
	}
	return c
}
