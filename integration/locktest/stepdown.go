package locktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// The leader's step-down (Resign, HandOff) under faults of the leader's own
// client, with its successors waiting on sessions of their own (registered
// in electionCases). What every case checks (see Leadership's "Stepping
// down"):
//
//   - the old leader's Done closes before the write that can start another
//     term is sent: while that write cannot reach the store, Done closes
//     all the same; a term monitor (termMonitor) sees no successor's
//     Campaign return while an older term's Done is open;
//   - a handoff refused, dropped or left unanswered never makes the old
//     Leadership lead again: a successor leads within 2 × TTL of the call,
//     the next in line if the handoff was not made as asked;
//   - once the call returned, error or not, the old Leadership's Done is
//     closed with an Err matching ErrReleased, its Deadline is the zero
//     Time, and Proclaim and HandOff fail with ErrNotLeader;
//   - nothing names a gone candidate afterwards: the term record names the
//     successor (Leader), only the live candidates have entries, and once
//     they resign nothing is left.
//
// Each case runs Resign, HandOff("") and HandOff to a named candidate that
// is not the next in line (stepOps), with its fault: the write held and
// then delivered (Delayed), held until its successor left, then refused
// by the store (Refused), held and then lost with the connections
// (Dropped), applied with its answer held and then lost (ReplyLost), and
// a context deadline of 1 ms (Deadline1ms) or swept across the write
// (DeadlineSweep). The faults need a RelayBackend.

// ClientFaults are faults of one session's client alone: its traffic is
// held or dropped while the servers go on serving each other and every
// other client (integration.ClientRelay for etcd; the ensemble's
// HoldReplies, CutClient and DropConnection for ZooKeeper).
type ClientFaults interface {
	// HoldReplies holds what the servers send the client on the
	// connections it has open now, while its requests still reach them
	// and are applied; release delivers what was held.
	HoldReplies() (release func(), err error)
	// Cut holds every byte between the client and the servers, both
	// ways, on connections it opens meanwhile too; heal delivers what was
	// held on the connections still open.
	Cut() (heal func(), err error)
	// Reset closes the client's connections under it: what they held is
	// lost, and the client connects again (its session lives on).
	Reset() error
}

// RelayBackend is a Backend that opens sessions whose client's
// connections a test can fault alone: the step-down cases need one.
type RelayBackend interface {
	// RelayedSession is Session (a client or connection of its own) with
	// the faults of that client.
	RelayedSession(t *testing.T) (Session, ClientFaults)
}

func relayedSession(t *testing.T, b Backend) (Session, ClientFaults) {
	t.Helper()
	rb, ok := b.(RelayBackend)
	if !ok {
		t.Fatalf("the backend %T is no locktest.RelayBackend: the step-down cases need a session whose client can be faulted alone", b)
	}
	return rb.RelayedSession(t)
}

// termMonitor records every term of one election from its Campaign's
// return to its Done's closing, and reports two terms open at once: a
// Campaign that returns while an older term's Done is still open (checked
// at the return itself), or two open Dones seen by its sampler, which
// looks every millisecond.
type termMonitor struct {
	mu         sync.Mutex
	terms      []*monitoredTerm
	violations []string
	samples    int
	stop       chan struct{}
	wg         sync.WaitGroup
}

type monitoredTerm struct {
	who   string
	l     distlock.Leadership
	began time.Time
	ended time.Time // when its Done hook saw Done close; zero before
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// newTermMonitor starts a monitor, stopped when the test ends.
func newTermMonitor(t *testing.T) *termMonitor {
	m := &termMonitor{stop: make(chan struct{})}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-tick.C:
			}
			m.mu.Lock()
			m.samples++
			var open []string
			for _, tm := range m.terms {
				if !isClosed(tm.l.Done()) {
					open = append(open, fmt.Sprintf("%s (token %d)", tm.who, tm.l.Token().Seq))
				} else if d := tm.l.Deadline(); !d.IsZero() {
					m.violations = append(m.violations, fmt.Sprintf("%s's Done is closed but its Deadline is %v, not the zero Time", tm.who, d))
				}
			}
			if len(open) > 1 {
				m.violations = append(m.violations, fmt.Sprintf("sampled two terms open at once: %s", strings.Join(open, ", ")))
			}
			m.mu.Unlock()
		}
	}()
	t.Cleanup(m.close)
	return m
}

func (m *termMonitor) close() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	m.wg.Wait()
}

// begin records l's term, which began as its Campaign returned, and
// checks that every older term's Done has closed by now.
func (m *termMonitor) begin(who string, l distlock.Leadership) {
	now := time.Now()
	m.mu.Lock()
	for _, o := range m.terms {
		if !isClosed(o.l.Done()) {
			m.violations = append(m.violations, fmt.Sprintf("%s's Campaign returned (token %d) while %s's term (token %d) was still open: its Done had not closed",
				who, l.Token().Seq, o.who, o.l.Token().Seq))
		}
	}
	tm := &monitoredTerm{who: who, l: l, began: now}
	m.terms = append(m.terms, tm)
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		select {
		case <-l.Done():
		case <-m.stop:
			return
		}
		m.mu.Lock()
		tm.ended = time.Now()
		m.mu.Unlock()
	}()
}

// campaign is CampaignAsync whose won term the monitor records the moment
// the Campaign returns.
func (m *termMonitor) campaign(ctx context.Context, e distlock.Elector, value string) <-chan Campaigned {
	ch := make(chan Campaigned, 1)
	go func() {
		l, err := e.Campaign(ctx, value)
		if err == nil {
			m.begin(value, l)
		}
		ch <- Campaigned{l, err}
	}()
	return ch
}

// check fails the test if the monitor saw two terms open at once.
func (m *termMonitor) check(t *testing.T, what string) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.violations) == 0 {
		return
	}
	var terms []string
	for _, tm := range m.terms {
		end := "open"
		if !tm.ended.IsZero() {
			end = fmt.Sprintf("Done +%v", tm.ended.Sub(m.terms[0].began).Round(time.Microsecond))
		}
		terms = append(terms, fmt.Sprintf("%s: token %d, began +%v, %s", tm.who, tm.l.Token().Seq, tm.began.Sub(m.terms[0].began).Round(time.Microsecond), end))
	}
	t.Fatalf("%s: %d violation(s): %s\nterms: %s", what, len(m.violations), strings.Join(m.violations, "; "), strings.Join(terms, "; "))
}

// stepOp is one way a leader steps down.
type stepOp struct {
	name   string
	resign bool
	to     string // HandOff's to
}

// stepOps are the step-downs each fault is tried with: Resign, a HandOff
// to the next in line (s1), and one to a named candidate behind it (s2).
var stepOps = []stepOp{
	{name: "Resign", resign: true},
	{name: "HandOffNext"},
	{name: "HandOffNamed", to: "s2"},
}

func (op stepOp) String() string {
	if op.resign {
		return "Resign"
	}
	return fmt.Sprintf("HandOff(%q)", op.to)
}

// stepped is what a step-down returned.
type stepped struct {
	li  distlock.LeaderInfo
	err error
}

func (op stepOp) do(ctx context.Context, l distlock.Leadership) stepped {
	if op.resign {
		return stepped{err: l.Resign(ctx)}
	}
	li, err := l.HandOff(ctx, op.to)
	return stepped{li, err}
}

func (op stepOp) async(ctx context.Context, l distlock.Leadership) <-chan stepped {
	ch := make(chan stepped, 1)
	go func() { ch <- op.do(ctx, l) }()
	return ch
}

// want is the candidate a handoff made as asked goes to: the named one,
// else the next in line.
func (op stepOp) want() string {
	if op.to != "" {
		return op.to
	}
	return "s1"
}

// stepCandidate is a candidate waiting on a session of its own.
type stepCandidate struct {
	value  string
	res    <-chan Campaigned
	cancel context.CancelFunc
	gone   bool // its Campaign returned (it led, or left)
}

// stepDown is one step-down's stage: on election name, x led first and
// handed over to l, the leader on the faulted client, with s1 and s2
// queued behind it before l won, so that the state l's watch won in
// already holds both and a step-down needs no read before its write.
type stepDown struct {
	t      *testing.T
	b      Backend
	name   string
	op     stepOp
	mon    *termMonitor
	faults ClientFaults
	ttl    time.Duration
	l      distlock.Leadership
	obs    Elector // on a session of its own, for Leader
	cands  []*stepCandidate
}

func newStepDown(t *testing.T, b Backend, name string, op stepOp) *stepDown {
	t.Helper()
	sd := &stepDown{t: t, b: b, name: name, op: op, mon: newTermMonitor(t)}
	ls, faults := relayedSession(t, b)
	sd.faults, sd.ttl = faults, ls.TTL()
	sd.obs = election(t, b.Session(t), name)
	x := MustCampaign(t, election(t, b.Session(t), name), "x")
	sd.mon.begin("x", x)
	rl := sd.mon.campaign(Ctx(t), election(t, ls, name), "l")
	b.WaitEntries(t, name, 2)
	for i, v := range []string{"s1", "s2"} {
		ctx, cancel := context.WithCancel(Ctx(t))
		t.Cleanup(cancel)
		sd.cands = append(sd.cands, &stepCandidate{value: v, res: sd.mon.campaign(ctx, election(t, b.Session(t), name), v), cancel: cancel})
		b.WaitEntries(t, name, i+3)
	}
	MustResign(t, x)
	sd.l = Leads(t, rl, "l, after x resigned")
	if !sd.l.Token().Newer(x.Token()) {
		t.Fatalf("l's token %v is not newer than x's %v", sd.l.Token(), x.Token())
	}
	wantLeader(t, sd.obs, leaderInfo(sd.l, "l"), "l leads")
	wantEntries(t, b, name, 3, "l leads, s1 and s2 wait")
	sd.mon.check(t, "before the step-down")
	return sd
}

func (sd *stepDown) candidate(v string) *stepCandidate {
	for _, c := range sd.cands {
		if c.value == v {
			return c
		}
	}
	sd.t.Fatalf("no candidate %q", v)
	return nil
}

// mustFault applies a fault, failing the test if it cannot be verified.
func mustFault(t *testing.T, what string, f func() (func(), error)) func() {
	t.Helper()
	end, err := f()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Cleanup(end)
	return end
}

// doneFirst waits for the leader's Done while its write cannot have been
// applied, and checks what Done closing must mean.
func (sd *stepDown) doneFirst(why string) {
	t := sd.t
	t.Helper()
	Recv(t, sd.l.Done(), fmt.Sprintf("the leader's Done during its %v, %s (it must close before the write is sent)", sd.op, why))
	if err := sd.l.Err(); !errors.Is(err, distlock.ErrReleased) {
		t.Fatalf("%v: the leader's Err once Done closed: %v, want ErrReleased", sd.op, err)
	}
	if d := sd.l.Deadline(); !d.IsZero() {
		t.Fatalf("%v: the leader's Deadline once Done closed: %v, want the zero Time", sd.op, d)
	}
	wantEntries(t, sd.b, sd.name, 3, fmt.Sprintf("%v: Done closed, %s: the leader's entry must still be there", sd.op, why))
	sd.notLeading("while the write cannot have been applied")
}

// notLeading fails if a waiting candidate's Campaign returned.
func (sd *stepDown) notLeading(what string) {
	sd.t.Helper()
	for _, c := range sd.cands {
		if c.gone {
			continue
		}
		select {
		case r := <-c.res:
			c.gone = true
			sd.t.Fatalf("%v %s: candidate %s's Campaign returned (err %v)", sd.op, what, c.value, r.Err)
		default:
		}
	}
}

// leave cancels candidate v's Campaign and waits until its entry is gone.
func (sd *stepDown) leave(v string) {
	t := sd.t
	t.Helper()
	c := sd.candidate(v)
	c.cancel()
	r := Recv(t, c.res, "the Campaign of "+v+", cancelled")
	c.gone = true
	if !errors.Is(r.Err, context.Canceled) {
		if r.Err == nil {
			t.Fatalf("candidate %s led while the leader's write was held", v)
		}
		t.Fatalf("candidate %s's cancelled Campaign: %v, want context.Canceled", v, r.Err)
	}
}

// successor waits until 2 × TTL after began for a waiting candidate's
// Campaign to return, and checks that it leads and no other did.
func (sd *stepDown) successor(began time.Time) (*stepCandidate, distlock.Leadership) {
	t := sd.t
	t.Helper()
	var waiting []*stepCandidate
	for _, c := range sd.cands {
		if !c.gone {
			waiting = append(waiting, c)
		}
	}
	bound := 2 * sd.ttl
	timer := time.NewTimer(time.Until(began.Add(bound)))
	defer timer.Stop()
	chs := make([]<-chan Campaigned, 2)
	for i, c := range waiting {
		chs[i] = c.res
	}
	var c *stepCandidate
	var r Campaigned
	select {
	case r = <-chs[0]:
		c = waiting[0]
	case r = <-chs[1]:
		c = waiting[1]
	case <-timer.C:
		t.Fatalf("%v: no waiting candidate led within 2 × TTL (%v) of the call (entries %q)", sd.op, bound, sd.b.Entries(t, sd.name))
	}
	c.gone = true
	if r.Err != nil {
		t.Fatalf("%v: candidate %s's Campaign: %v", sd.op, c.value, r.Err)
	}
	sd.notLeading(fmt.Sprintf("after %s led", c.value))
	sd.mon.check(t, fmt.Sprintf("%v: once %s led", sd.op, c.value))
	if !r.Leadership.Token().Newer(sd.l.Token()) {
		t.Fatalf("%v: %s's token %v is not newer than the old leader's %v", sd.op, c.value, r.Leadership.Token(), sd.l.Token())
	}
	return c, r.Leadership
}

// finish checks what the step-down left, r being what it returned and
// succ the candidate that led after it, and then lets every candidate
// lead and resign in turn: nothing may be left.
func (sd *stepDown) finish(r stepped, succ *stepCandidate, sl distlock.Leadership) {
	t := sd.t
	t.Helper()
	l := sd.l
	if !isClosed(l.Done()) {
		t.Fatalf("%v returned (%v) with the leader's Done open", sd.op, r.err)
	}
	if err := l.Err(); !errors.Is(err, distlock.ErrReleased) {
		t.Fatalf("%v returned (%v): the old leader's Err %v, want ErrReleased", sd.op, r.err, err)
	}
	if d := l.Deadline(); !d.IsZero() {
		t.Fatalf("%v returned: the old leader's Deadline %v, want the zero Time", sd.op, d)
	}
	wantNotLeader(t, l.Proclaim(Ctx(t), "again"), fmt.Sprintf("Proclaim after %v", sd.op))
	released(t, l, fmt.Sprintf("after %v", sd.op))
	if !sd.op.resign && r.err == nil && (r.li.Value != succ.value || r.li.Token != sl.Token()) {
		t.Fatalf("%v returned %+v, but %s leads with token %v", sd.op, r.li, succ.value, sl.Token())
	}
	wantLeader(t, sd.obs, leaderInfo(sl, succ.value), fmt.Sprintf("after %v, %s leads", sd.op, succ.value))
	var rest []*stepCandidate
	for _, c := range sd.cands {
		if !c.gone {
			rest = append(rest, c)
		}
	}
	wantEntries(t, sd.b, sd.name, 1+len(rest), fmt.Sprintf("after %v: %s leads, %d wait; the old leader's entry is gone", sd.op, succ.value, len(rest)))
	// The rest lead in turn.
	prev, prevValue := sl, succ.value
	for _, c := range rest {
		MustResign(t, prev)
		next := Leads(t, c.res, c.value+" after "+prevValue+" resigned")
		c.gone = true
		wantLeader(t, sd.obs, leaderInfo(next, c.value), c.value+" leads")
		prev, prevValue = next, c.value
	}
	MustResign(t, prev)
	wantNoLeader(t, sd.obs, "everyone resigned")
	wantEntries(t, sd.b, sd.name, 0, "everyone resigned")
	sd.mon.check(t, fmt.Sprintf("%v and after", sd.op))
}

// wantResult checks a step-down's return: a Resign's error must be nil, a
// HandOff's nil or wrapping errIs (when set) and naming the new leader.
func (sd *stepDown) wantResult(r stepped, errIs error) {
	t := sd.t
	t.Helper()
	switch {
	case r.err == nil && errIs == nil:
	case r.err != nil && errIs != nil && errors.Is(r.err, errIs) && !sd.op.resign:
		if r.li.Token.IsZero() {
			t.Fatalf("%v: %v, with no new leader", sd.op, r.err)
		}
	case errIs != nil:
		t.Fatalf("%v: %+v, %v; want an error wrapping %v", sd.op, r.li, r.err, errIs)
	default:
		t.Fatalf("%v: %v", sd.op, r.err)
	}
}

// stepDownCase runs run for each way of stepping down, on an election of
// its own.
func stepDownCase(prefix string, run func(sd *stepDown)) func(t *testing.T, b Backend) {
	return func(t *testing.T, b Backend) {
		for _, op := range stepOps {
			t.Run(op.name, func(t *testing.T) {
				run(newStepDown(t, b, prefix+"-"+strings.ToLower(op.name), op))
			})
		}
	}
}

// electionStepDownDelayed: the leader's client is cut off from every
// server before the step-down; Done closes all the same, with the
// leader's entry still there, and once the cut heals the held write is
// applied as sent: the handoff is made as asked.
var electionStepDownDelayed = stepDownCase("stepdown-delayed", func(sd *stepDown) {
	t := sd.t
	heal := mustFault(t, "cut the leader's client off", sd.faults.Cut)
	began := time.Now()
	res := sd.op.async(Ctx(t), sd.l)
	sd.doneFirst("its client cut off")
	heal()
	r := Recv(t, res, fmt.Sprintf("%v once the cut healed", sd.op))
	sd.wantResult(r, nil)
	succ, sl := sd.successor(began)
	if succ.value != sd.op.want() {
		t.Fatalf("%v: %s leads, want %s", sd.op, succ.value, sd.op.want())
	}
	sd.finish(r, succ, sl)
})

// electionStepDownRefused: the leader's write is held (its client cut
// off) until the candidate it goes to has left; then the store refuses
// it. The step-down picks again: a Resign or a HandOff to the next in
// line goes to the one behind, a HandOff to the named one that left goes
// to the next in line instead, with an error wrapping ErrNoCandidate.
var electionStepDownRefused = stepDownCase("stepdown-refused", func(sd *stepDown) {
	t := sd.t
	heal := mustFault(t, "cut the leader's client off", sd.faults.Cut)
	began := time.Now()
	res := sd.op.async(Ctx(t), sd.l)
	sd.doneFirst("its client cut off")
	leaver := sd.op.want()
	sd.leave(leaver)
	wantEntries(t, sd.b, sd.name, 2, leaver+" left")
	heal()
	r := Recv(t, res, fmt.Sprintf("%v once the cut healed", sd.op))
	want, errIs := "s2", error(nil)
	if sd.op.to != "" {
		want, errIs = "s1", distlock.ErrNoCandidate
	}
	sd.wantResult(r, errIs)
	succ, sl := sd.successor(began)
	if succ.value != want {
		t.Fatalf("%v: %s leads, want %s", sd.op, succ.value, want)
	}
	sd.finish(r, succ, sl)
})

// electionStepDownDropped: the leader's client is cut off, and once Done
// has closed its connections are closed under it, so that its write, if
// it was out, is lost unanswered; then the cut heals. The step-down learns
// the write was not made and tries again, or, not knowing, deletes the
// entry: either way a successor leads (a HandOff made as asked goes to
// the one asked for; one that fell back to the vacancy, to the next in
// line, and says so).
var electionStepDownDropped = stepDownCase("stepdown-dropped", func(sd *stepDown) {
	t := sd.t
	heal := mustFault(t, "cut the leader's client off", sd.faults.Cut)
	began := time.Now()
	res := sd.op.async(Ctx(t), sd.l)
	sd.doneFirst("its client cut off")
	if err := sd.faults.Reset(); err != nil {
		t.Fatalf("close the leader's connections: %v", err)
	}
	heal()
	r := Recv(t, res, fmt.Sprintf("%v once its connections were closed and the cut healed", sd.op))
	succ, sl := sd.successor(began)
	sd.wantFallback(r, succ)
	sd.finish(r, succ, sl)
})

// wantFallback checks the outcome of a step-down whose write's answer may
// have been lost: made as asked (no error), or the term left vacant for
// the next in line (a HandOff's error says so; a Resign's aim is reached
// all the same), or made while the step-down could not learn it (an
// error, and the one asked for leads).
func (sd *stepDown) wantFallback(r stepped, succ *stepCandidate) {
	t := sd.t
	t.Helper()
	switch {
	case r.err == nil && succ.value == sd.op.want():
	case r.err == nil:
		t.Fatalf("%v: no error, but %s leads, want %s", sd.op, succ.value, sd.op.want())
	case sd.op.resign:
		t.Fatalf("%v: %v", sd.op, r.err)
	case succ.value == "s1" || succ.value == sd.op.want():
		t.Logf("%v did not know its handoff made (%s leads): %v", sd.op, succ.value, r.err)
	default:
		t.Fatalf("%v: %v; %s leads", sd.op, r.err, succ.value)
	}
}

// electionStepDownReplyLost: what the servers send the leader's client is
// held, so its write is applied unanswered: the successor leads while the
// leader's call still waits (and the monitor sees the old Done closed
// before). Then the leader's connections are closed, losing the answer;
// the step-down learns from a read that its handoff was made.
var electionStepDownReplyLost = stepDownCase("stepdown-replylost", func(sd *stepDown) {
	t := sd.t
	mustFault(t, "hold the replies to the leader's client", sd.faults.HoldReplies)
	began := time.Now()
	res := sd.op.async(Ctx(t), sd.l)
	succ, sl := sd.successor(began)
	if !isClosed(sd.l.Done()) {
		t.Fatalf("%v: %s leads while the old leader's Done is open", sd.op, succ.value)
	}
	if succ.value != sd.op.want() {
		t.Fatalf("%v: %s leads, want %s", sd.op, succ.value, sd.op.want())
	}
	if err := sd.faults.Reset(); err != nil {
		t.Fatalf("close the leader's connections: %v", err)
	}
	r := Recv(t, res, fmt.Sprintf("%v once its unanswered connections were closed", sd.op))
	sd.wantFallback(r, succ)
	sd.finish(r, succ, sl)
})

// electionStepDownDeadline: the step-down's context has a 1 ms deadline,
// which passes before, during or after its write. Whatever it returns,
// the old leader has stepped down and a successor leads within 2 × TTL.
var electionStepDownDeadline = stepDownCase("stepdown-deadline", func(sd *stepDown) {
	t := sd.t
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	began := time.Now()
	r := sd.op.do(ctx, sd.l)
	if r.err != nil {
		t.Logf("%v with a 1 ms deadline: %v", sd.op, r.err)
	}
	succ, sl := sd.successor(began)
	switch {
	case r.err == nil && succ.value != sd.op.want():
		t.Fatalf("%v: no error, but %s leads, want %s", sd.op, succ.value, sd.op.want())
	case succ.value != "s1" && succ.value != sd.op.want():
		t.Fatalf("%v: %v; %s leads", sd.op, r.err, succ.value)
	}
	sd.finish(r, succ, sl)
})

// stepDownDeadlines are the deadlines electionStepDownDeadlines sweeps:
// from one that passes before the write is sent to ones that pass while
// it is in flight, or after its answer.
var stepDownDeadlines = []time.Duration{2 * time.Millisecond, 4 * time.Millisecond, 6 * time.Millisecond, 8 * time.Millisecond, 12 * time.Millisecond, 20 * time.Millisecond}

// electionStepDownDeadlines: the 1 ms case's checks, for deadlines swept
// across the step-down's write, one round each on an election of its
// own. A deadline that passes while the write is in flight leaves its
// outcome to be learnt: a step-down that says the store refused its
// handoff to a named candidate must not find that candidate leading
// through it (the next in line, not the named one, claims a vacancy).
func electionStepDownDeadlines(t *testing.T, b Backend) {
	for _, d := range stepDownDeadlines {
		for _, op := range stepOps {
			t.Run(fmt.Sprintf("%s-%v", op.name, d), func(t *testing.T) {
				sd := newStepDown(t, b, fmt.Sprintf("stepdown-sweep-%s-%d", strings.ToLower(op.name), d.Milliseconds()), op)
				ctx, cancel := context.WithTimeout(context.Background(), d)
				defer cancel()
				began := time.Now()
				r := sd.op.do(ctx, sd.l)
				succ, sl := sd.successor(began)
				if r.err != nil {
					t.Logf("%v with a %v deadline: %s leads; %v", sd.op, d, succ.value, r.err)
				}
				switch {
				case r.err == nil && succ.value != sd.op.want():
					t.Fatalf("%v: no error, but %s leads, want %s", sd.op, succ.value, sd.op.want())
				case succ.value != "s1" && succ.value != sd.op.want():
					t.Fatalf("%v: %v; %s leads", sd.op, r.err, succ.value)
				case r.err != nil && sd.op.to != "" && succ.value == sd.op.to && strings.Contains(r.err.Error(), "refused"):
					t.Errorf("%v says its handoff was refused (%v), but %s leads: only the handoff's own write can have made it leader, so it was applied", sd.op, r.err, succ.value)
				}
				sd.finish(r, succ, sl)
			})
		}
	}
}
