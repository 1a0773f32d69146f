package qlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
)

// An election is a queue of candidate entries beside a term record. The
// term record names the leading candidate's entry; the revision at which
// it was written (etcd mod revision, ZooKeeper mzxid) is the term's
// fencing token. A candidate leads while the record names its entry and
// the entry exists; when the named entry is gone (its session ended, it
// was deleted) the term is vacant, and the best waiting candidate — the
// highest priority, the oldest among equals — claims the next term by
// writing the record. A handoff deletes the leader's entry and writes the
// record naming the successor in one write, so the successor's term
// starts at the very revision the leader's ends.
//
// Why a record and not "the oldest candidate leads": a handoff to a
// chosen candidate, or one of higher priority, makes a leader of a
// candidate that is not the oldest, and a term's token must be larger
// than every earlier term's, which an entry's own position is not once
// older candidates may lead after it. Every term therefore starts with a
// write, and every write's revision is larger than all before it.
//
// Every write of the record is a compare-and-set on the record as the
// writer read it, guarded by the named entry's existence, so no two terms
// overlap and no candidate leads whose entry is gone (no phantom leader).

// ErrTermMoved reports a ClaimTerm or HandOff whose compare failed: the term
// record, or an entry it depends on, is not as the caller read it.
var ErrTermMoved = errors.New("the election's term moved")

// Contender is one candidate of an election as its state shows it.
type Contender struct {
	// Entry is the candidate's entry: its key and queue position.
	Entry
	// Priority is the candidate's priority (in its key).
	Priority int
	// Value is the candidate's value (see Elections for when it is set).
	Value string
	// Owner is the candidate's session: its etcd lease or ZooKeeper
	// session ID.
	Owner uint64
}

// ElectionState is one consistent view of an election.
type ElectionState struct {
	// Term is the term record's revision: the token of the term it
	// names. 0 when there is no record.
	Term int64
	// Leader is the key of the entry the term record names; "" for none.
	Leader string
	// Version is what ClaimTerm and HandOff compare the record against (its
	// mod revision on etcd, 0 for none; the directory's data version on
	// ZooKeeper).
	Version int64
	// Contenders are the election's candidates.
	Contenders []Contender
}

// leader returns the leading candidate: the one the term record names, if
// its entry is still there.
func (s ElectionState) leader() (Contender, bool) {
	if s.Leader == "" {
		return Contender{}, false
	}
	for _, c := range s.Contenders {
		if c.Key == s.Leader {
			return c, true
		}
	}
	return Contender{}, false
}

// next returns the candidate that leads next: among the candidates other
// than the entry with key but, if value is not empty, with that value,
// the highest priority, the oldest among equals.
func (s ElectionState) next(but string, value string) (Contender, bool) {
	var best Contender
	found := false
	for _, c := range s.Contenders {
		if c.Key == but || value != "" && c.Value != value {
			continue
		}
		if !found || before(c, best) {
			best, found = c, true
		}
	}
	return best, found
}

// before reports whether candidate a leads before b.
func before(a, b Contender) bool {
	return cmp.Or(cmp.Compare(b.Priority, a.Priority), cmp.Compare(a.Seq, b.Seq)) < 0
}

// leaderEntry is leader l as a lock's holder (Inspect, Revoke).
func (s ElectionState) leaderEntry(name string, l Contender) distlock.QueueEntry {
	return distlock.QueueEntry{
		Key: l.Key, Kind: distlock.Candidate, Holding: true, Seq: l.Seq, Holder: l.Value,
		Owner: strconv.FormatUint(l.Owner, 16),
		Token: distlock.Token{Name: name, Seq: s.Term, Owner: l.Owner},
	}
}

// info returns the leader as users see it, the zero LeaderInfo for none.
func (s ElectionState) info(name string) distlock.LeaderInfo {
	l, ok := s.leader()
	if !ok {
		return distlock.LeaderInfo{}
	}
	return distlock.LeaderInfo{Value: l.Value, Token: distlock.Token{Name: name, Seq: s.Term, Owner: l.Owner}, Priority: l.Priority}
}

// Election is leader election on a queue of candidates and a term record
// (see above). An Election is a handle, safe for concurrent use: every
// Campaign call is a candidate of its own, even on one session.
type Election struct {
	lock
	cfg distlock.ElectionConfig
}

var _ distlock.Elector = (*Election)(nil)

// NewElection returns the election called name on e's session.
func NewElection(e *Engine, name string, cfg distlock.ElectionConfig) (*Election, error) {
	return newRecipe("election", e, name, func(l lock) *Election { return &Election{l, cfg} })
}

// Campaign enqueues a candidate with value as its value and waits until
// it leads. It returns only once the term record names its entry, written
// while the entry existed (no phantom leader), and fails, leaving no
// entry behind, when ctx ends (the error wraps ctx's cause), when the
// session ends (distlock.ErrSessionExpired, ErrSessionClosed) or when its
// entry is deleted by someone else (distlock.ErrEntryGone). Once the
// session has ended every Campaign fails: campaign again on a new
// session.
//
// The returned Leadership ends (Done, Context) when the entry goes, the
// session ends, or Resign or HandOff is called; its Err then says why.
func (el *Election) Campaign(ctx context.Context, value string, opts ...distlock.CampaignOption) (distlock.Leadership, error) {
	c := distlock.NewCampaignConfig(opts...)
	if c.Priority > distlock.MaxPriority || c.Priority < -distlock.MaxPriority {
		return nil, el.e.fail(el.name, distlock.OpCampaign, fmt.Errorf("priority %d is out of range [-%d, %d]", c.Priority, distlock.MaxPriority, distlock.MaxPriority))
	}
	r := Request{Op: distlock.OpCampaign, Kind: Candidate, Value: []byte(value), Priority: c.Priority}
	l := &leadership{e: el.e, tel: el.tel, name: el.name, prio: c.Priority}
	n, lease, err := el.takeWith(ctx, r, hooks{handedOff: &l.handedOff, ender: &l.endHold, loser: &l.lose}, func(ctx context.Context) (*Node, queueStats, error) {
		return el.campaign(ctx, r, l)
	})
	if err != nil {
		return nil, err
	}
	l.Lease, l.n = lease, n
	context.AfterFunc(n.alive, func() {
		// A leader whose entry was deleted by someone else may still be
		// named by the term record (etcd keeps it until the session
		// ends): the cleanup of a failed acquisition clears it.
		if !errors.Is(context.Cause(n.alive), distlock.ErrReleased) && el.e.st.Err() == nil {
			el.e.d.Abandon(n)
		}
	})
	return l, nil
}

// campaign makes r's candidate entry and waits until it leads, following
// the election's state: it leads once the term record names its entry;
// while the term is vacant and it is the next in line, it claims the
// term; while a candidate of a lower priority leads and it is the next in
// line, it asks that leader to step down (preempt).
func (el *Election) campaign(ctx context.Context, r Request, l *leadership) (_ *Node, qs queueStats, _ error) {
	e, name := el.e, el.name
	ctx, done, fail, err := e.start(ctx, name, r.Op)
	defer done()
	if err != nil {
		return nil, qs, err
	}
	n, _, _, err := e.d.Enqueue(ctx, name, r)
	if err != nil {
		return nil, qs, fail(err)
	}
	n.Name = name
	e.follow(n)
	qs.enqueued = true

	// The watch outlives a won campaign: the leader keeps the election's
	// state from it for its HandOff (leadership.keep), until its entry's
	// life ends. ctx ends it only while campaigning.
	wctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopAlive := context.AfterFunc(n.alive, func() { cancel(context.Cause(n.alive)) })
	stopCtx := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	states := make(chan ElectionState)
	go e.d.WatchElection(wctx, name, states)
	won := false
	defer func() {
		stopCtx()
		if won {
			return
		}
		stopAlive()
		cancel(nil)
		for range states { // let the watch end
		}
	}()
	var (
		pre      preemption
		st       ElectionState
		claiming bool // the last state's claim failed without an answer
	)
	defer pre.stop()
	for {
		if claiming {
			// A claim whose outcome is unknown: if it was made, the watch
			// says so; if not, try again on the same state.
			select {
			case s, ok := <-states:
				if !ok {
					return nil, qs, el.campaignEnd(ctx, n, fail)
				}
				st = s
			case <-wctx.Done():
				return nil, qs, el.campaignEnd(ctx, n, fail)
			case <-time.After(RetryDelay):
			}
		} else {
			s, ok := <-states
			if !ok {
				return nil, qs, el.campaignEnd(ctx, n, fail)
			}
			st = s
		}
		claiming = false
		lead, led := st.leader()
		next, _ := st.next(st.Leader, "")
		switch {
		case led && lead.Key == n.Key:
			n.Token = st.Term
			n.Waited = true
			pre.finish()
			won = true
			l.keep(st, states)
			return n, qs, nil
		case led:
			qs.waitedOn = 1
			if next.Key == n.Key && r.Priority > lead.Priority {
				pre.start(el, st.Term, lead, string(r.Value), r.Priority)
			}
		case next.Key == n.Key:
			term, err := e.d.ClaimTerm(wctx, n, st)
			switch {
			case err == nil:
				n.Token = term
				pre.finish()
				won = true
				l.keep(st, states)
				return n, qs, nil
			case errors.Is(err, ErrTermMoved):
				// The watch brings the state that moved it.
			case wctx.Err() != nil:
				return nil, qs, el.campaignEnd(ctx, n, fail)
			default:
				e.st.log.Debug(e.st.backend.Pkg+": claim failed; trying again", "election", name, "err", err)
				claiming = true
			}
		}
	}
}

// campaignEnd is how a campaign that did not win ends: its entry is
// deleted, and the error says why (its entry's end, ctx's, or the watch's).
func (el *Election) campaignEnd(ctx context.Context, n *Node, fail func(error) error) error {
	var err error
	switch {
	case n.alive.Err() != nil:
		err = context.Cause(n.alive)
	case ctx.Err() != nil:
		err = context.Cause(ctx)
	default:
		err = fmt.Errorf("%w: the election's watch ended (connection closed)", distlock.ErrSessionClosed)
	}
	el.e.abandon(n, err)
	return fail(err)
}

// preemption is a waiting candidate's request that a leader of a lower
// priority step down: a revocation of the leader's term, forced after the
// election's preempt grace, running until the candidate's campaign ends.
type preemption struct {
	term   int64
	cancel context.CancelFunc
	done   chan struct{}
}

// start asks the leader lead of term to step down, once per term.
func (p *preemption) start(el *Election, term int64, lead Contender, value string, prio int) {
	if p.term == term {
		return
	}
	p.stop()
	ctx, cancel := context.WithCancel(el.e.st.Context())
	p.term, p.cancel, p.done = term, cancel, make(chan struct{})
	grace := el.cfg.PreemptGrace
	req := distlock.RevokeRequest{
		Reason: fmt.Sprintf("preempted by candidate %q of priority %d (the leader's is %d)", value, prio, lead.Priority),
		By:     cmp.Or(el.e.st.holder, revokedBy()),
		Grace:  max(grace, 0),
		Force:  grace >= 0,
	}
	st := ElectionState{Term: term, Leader: lead.Key}
	held := st.leaderEntry(el.name, lead)
	el.e.st.log.Info(el.e.st.backend.Pkg+": preempting the leader", "election", el.name, "leader", lead.Value, "token", term, "grace", grace)
	go func() {
		defer close(p.done)
		if _, err := revokeHolders(ctx, el.e.d.Revoker(), el.name, []distlock.QueueEntry{held}, req); err != nil && ctx.Err() == nil {
			el.e.st.log.Info(el.e.st.backend.Pkg+": preemption failed", "election", el.name, "token", term, "err", err)
		}
	}()
}

// finish lets a preemption whose leader has gone (this candidate won)
// record its outcome, for a bounded time, then stops it.
func (p *preemption) finish() {
	if p.cancel != nil {
		t := time.NewTimer(AbandonTimeout)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
		}
	}
	p.stop()
}

// stop ends a running preemption: this candidate gave up, or the leader
// it asked changed (and a forced delete would hit the wrong term).
func (p *preemption) stop() {
	if p.cancel != nil {
		p.cancel()
		<-p.done
		p.cancel = nil
	}
}

// Leader returns the current leader's value and token, read fresh from
// the store (at least as new as every write acknowledged before the
// call). With no leader (no candidate, or a term vacant until the next
// candidate claims it) the error wraps distlock.ErrNoLeader.
func (el *Election) Leader(ctx context.Context) (distlock.LeaderInfo, error) {
	st, err := el.e.d.ReadElection(ctx, el.name)
	if err != nil {
		return distlock.LeaderInfo{}, el.e.fail(el.name, distlock.OpLeader, err)
	}
	li := st.info(el.name)
	if li.NoLeader() {
		return li, el.e.fail(el.name, distlock.OpLeader, distlock.ErrNoLeader)
	}
	return li, nil
}

// Observe streams the election's leader: first the current one (the zero
// LeaderInfo if none), then every change, in the order they happened: a
// new leader (new token), a Proclaim (same token, new value), and "no
// leader" (see LeaderInfo.NoLeader) while a term is vacant or when the
// last candidate goes. Consecutive equal values are sent once. The
// channel is closed when ctx ends or the session's client or connection
// is closed. Receivers must keep up: Observe waits for each value to be
// taken.
func (el *Election) Observe(ctx context.Context) <-chan distlock.LeaderInfo {
	out := make(chan distlock.LeaderInfo)
	go func() {
		defer close(out)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		states := make(chan ElectionState)
		go el.e.d.WatchElection(ctx, el.name, states)
		var last distlock.LeaderInfo
		first := true
		for st := range states {
			li := st.info(el.name)
			if !first && li == last {
				continue
			}
			first, last = false, li
			select {
			case out <- li:
			case <-ctx.Done():
			}
		}
	}()
	return out
}

// leadership is a won campaign: the held entry's Lease, and the entry for
// Proclaim, Resign and HandOff.
type leadership struct {
	*distlock.Lease
	e    *Engine
	n    *Node
	tel  *lockTel
	name string
	prio int
	// handedOff is set once a HandOff deleted the entry: the Lease's
	// release then has nothing left to delete.
	handedOff atomic.Bool
	// endHold measures the hold's end (see hooks.ender).
	endHold func(cause error)
	// lose closes the Lease's Done (see hooks.loser): a step-down does
	// before its write can start another term.
	lose func(reason error)
	// state is the election's latest state the leader's watch saw (keep).
	state atomic.Pointer[ElectionState]
	// mu serializes Proclaim, Resign and HandOff: a driver may keep the
	// entry's version in n, which Proclaim updates.
	mu sync.Mutex
}

// String names the leader's entry.
func (l *leadership) String() string { return l.n.Key }

// keep follows the election's states on the won campaign's watch until
// it ends (with the entry's life), so that a HandOff can pick its
// successor without reading first. won is the state the campaign won in.
func (l *leadership) keep(won ElectionState, states <-chan ElectionState) {
	l.state.Store(&won)
	go func() {
		for st := range states {
			l.state.Store(&st)
		}
	}()
}

func (l *leadership) fail(op distlock.Op, err error) error {
	return l.e.fail(l.n.Name, op, err)
}

// endCause says why the leader's entry's life ended.
func (l *leadership) endCause() error { return cmp.Or(l.Err(), context.Cause(l.n.alive)) }

// notLeader is the error of an operation on a leadership whose term has
// ended. err is what the operation found (the Lease's error, Unlock's, or
// the term record's state); the message says in an election's words how
// the term ended ("not the leader: this term ended (resigned)", "not the
// leader: this term was lost: ..."), from the Lease's Err unless err is
// the loss itself, and errors.Is and errors.As see both.
func (l *leadership) notLeader(op distlock.Op, err error) error {
	why := err
	if e := l.Err(); e != nil && !errors.Is(err, distlock.ErrLost) {
		why = e
	}
	return l.fail(op, fmt.Errorf("%w: %w", distlock.ErrNotLeader, &termOver{err: err, why: why}))
}

// termOver is how a leadership's term ended, as the cause of an election
// operation's error: its text is an election's words (termWords of why),
// and it wraps err, and why if that is another error.
type termOver struct{ err, why error }

func (e *termOver) Error() string { return termWords(e.why) }

func (e *termOver) Unwrap() []error {
	if e.why == e.err {
		return []error{e.err}
	}
	return []error{e.err, e.why}
}

// termWords says in an election's words how a term ended, given the
// Lease's error that ended it (or what an operation found).
func termWords(err error) string {
	var sd *steppedDown
	var rev *distlock.RevokedError
	switch {
	case errors.Is(err, distlock.ErrLost):
		return "this term was lost: " + strings.TrimPrefix(causeText(err), distlock.ErrLost.Error()+": ")
	case errors.As(err, &sd):
		return "this term ended (" + sd.ended() + ")"
	case errors.As(err, &rev):
		return fmt.Sprintf("this leader was asked to step down by %s: %q", rev.By, rev.Reason)
	case errors.Is(err, distlock.ErrReleased):
		return "this term ended (released)"
	}
	return "this term ended: " + causeText(err)
}

// causeText is the text of a Lease's error without the lock's operation
// ("unlock: ", "hold: "), which an election's own operation replaces: the
// cause of each *distlock.LockError in it, joined by "; ".
func causeText(err error) string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		parts := []string{}
		for _, e := range j.Unwrap() {
			parts = append(parts, causeText(e))
		}
		return strings.Join(parts, "; ")
	}
	var le *distlock.LockError
	if errors.As(err, &le) && le.Err != nil {
		return le.Err.Error()
	}
	return err.Error()
}

// entryDelete is the error of the leader's entry's delete (the Lease's
// Unlock) inside a step-down's: it reads "deleting the leader's entry:
// CAUSE" and wraps err.
type entryDelete struct{ err error }

func (e entryDelete) Error() string { return "deleting the leader's entry: " + causeText(e.err) }
func (e entryDelete) Unwrap() error { return e.err }

// Proclaim replaces the leader's value, only while this term's entry
// still exists; otherwise (and, without writing, once this Leadership has
// ended) it fails with an error wrapping distlock.ErrNotLeader. A Proclaim
// does not hand leadership over.
func (l *leadership) Proclaim(ctx context.Context, value string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.Err(); err != nil {
		return l.notLeader(distlock.OpProclaim, err)
	}
	if err := l.e.d.Proclaim(ctx, l.n, value); err != nil {
		return l.fail(distlock.OpProclaim, err)
	}
	return nil
}

// Resign ends leadership (see distlock.Leadership): its Done closes
// first, then it hands over to the next in line as HandOff does, or, when
// no candidate waits or every handoff it tries is refused, deletes the
// entry if it is still this term's (the Lease's Unlock), which leaves the
// term vacant for the next candidate to claim. If leadership had already
// been lost, or Resign was called before, the error wraps
// distlock.ErrNotLeader (and ErrLost or ErrReleased); if the delete could
// not be made, the error says so (the entry is retried in the background
// and goes with the session at the latest) — Resign never pretends.
func (l *leadership) Resign(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, span := l.tel.release(ctx, distlock.OpResign, l.n.Kind, l.n.Token)
	defer span.End()
	_, err := l.stepDown(ctx, distlock.OpResign, "", true)
	endSpan(span, err)
	return err
}

// HandOff ends this term and starts the successor's in one write (see
// distlock.Leadership).
func (l *leadership) HandOff(ctx context.Context, to string) (distlock.LeaderInfo, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, span := l.tel.release(ctx, distlock.OpHandOff, l.n.Kind, l.n.Token)
	defer span.End()
	li, err := l.stepDown(ctx, distlock.OpHandOff, to, false)
	endSpan(span, err)
	return li, err
}

// handoffTries bounds how often a handoff picks a successor again after
// its write was refused (the one it picked left before the write).
const handoffTries = 8

// steppedDown is the cause a leadership's Done closes with when its leader
// ends the term (Resign, HandOff, op): it matches distlock.ErrReleased.
type steppedDown struct {
	op  distlock.Op
	how string
}

func (e *steppedDown) Error() string { return e.how }
func (e *steppedDown) Unwrap() error { return distlock.ErrReleased }

// ended says how the term ended, for termWords.
func (e *steppedDown) ended() string {
	if e.op == distlock.OpHandOff {
		return "handed off"
	}
	return "resigned"
}

// stepDown is Resign (resign set) and HandOff(to). The rule it keeps: the
// leader stops believing before anybody else can lead. Everything that
// can keep it leading (no candidate to hand over to, a term record that
// no longer names it) is decided before any write, from the state the
// leader's watch last saw or a fresh read; then Done closes (its Err
// saying so), and only then does the write that may start the
// successor's term go out. A write refused or unanswered after that never
// makes this Leadership lead again: the handoff is tried with a new pick
// (HandOff to a value that left falls back to the next in line), and
// failing that the entry is deleted, which leaves the term vacant for the
// next candidate to claim.
func (l *leadership) stepDown(ctx context.Context, op distlock.Op, to string, resign bool) (distlock.LeaderInfo, error) {
	n := l.n
	// A leader asked to step down (revoked, preempted) still leads until
	// it hands over: its entry is alive though its Lease's Err is set.
	if n.alive.Err() != nil {
		if !resign {
			return distlock.LeaderInfo{}, l.notLeader(op, l.endCause())
		}
		// Lost (or resigned) before: Unlock removes what is left and
		// reports it.
		err := l.Unlock(ctx)
		if errors.Is(err, distlock.ErrLost) || errors.Is(err, distlock.ErrReleased) {
			err = l.notLeader(op, err)
		}
		return distlock.LeaderInfo{}, err
	}
	st, next, found, err := l.pick(ctx, op, to)
	switch {
	case err != nil && resign:
		// Resign steps down all the same: without a pick, by deleting the
		// entry (a no-op if it is gone already).
		l.endHold(distlock.ErrReleased)
		if errors.Is(err, distlock.ErrNotLeader) {
			_ = l.vacate(ctx, op, "resigned: the term had ended", nil)
			return distlock.LeaderInfo{}, err
		}
		return distlock.LeaderInfo{}, l.vacate(ctx, op, "resigned: the election could not be read to pick a successor; the term is left vacant", nil)
	case err != nil:
		return distlock.LeaderInfo{}, err
	}
	if !found && !resign {
		what := "no other candidate waits"
		if to != "" {
			what = fmt.Sprintf("no waiting candidate has the value %q", to)
		}
		return distlock.LeaderInfo{}, l.fail(op, fmt.Errorf("%w: %s", distlock.ErrNoCandidate, what))
	}
	// From here this term is over, whatever the write does. Measured as
	// ended before the write that starts the successor's hold.
	l.endHold(distlock.ErrReleased)
	if !found {
		return distlock.LeaderInfo{}, l.vacate(ctx, op, "resigned: no other candidate waits, the term is left vacant", nil)
	}
	// The write deletes this entry: its follower must not take that for a
	// loss. Held back, the loss is reported if the write did not happen.
	n.holdLoss()
	l.lose(l.fail(op, &steppedDown{op, fmt.Sprintf("handing leadership over to candidate %q", next.Value)}))
	var instead error // set once HandOff(to)'s candidate left and the next in line was picked
	for try := 1; ; try++ {
		term, resent, err := l.handOffWrite(ctx, st, next)
		li := distlock.LeaderInfo{Value: next.Value, Token: distlock.Token{Name: l.name, Seq: term, Owner: next.Owner}, Priority: next.Priority}
		unknown, read := err != nil && !errors.Is(err, ErrTermMoved), false
		if resent && errors.Is(err, ErrTermMoved) {
			// A copy sent before the refused one may have been applied:
			// read which. This entry gone and the successor leading a
			// newer term says it was; this entry still there says it
			// was not (and can no longer be).
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), AbandonTimeout)
			now, rerr := l.e.d.ReadElection(rctx, l.name)
			cancel()
			mine := slices.ContainsFunc(now.Contenders, func(c Contender) bool { return c.Key == n.Key })
			switch lead, ok := now.leader(); {
			case rerr != nil:
				unknown, err = true, fmt.Errorf("%w (and the election could not be read: %w)", err, rerr)
			case mine:
				st, read = now, true
			case ok && lead.Key == next.Key && now.Term > n.Token:
				li, err = now.info(l.name), nil
			default:
				unknown, err = true, fmt.Errorf("%w, and this entry is gone with %+v leading", err, now.info(l.name))
			}
		}
		if err == nil {
			l.handedOff.Store(true)
			n.dropLoss(distlock.ErrReleased)
			_ = l.Unlock(ctx) // ends the Lease as released: nothing to delete
			l.e.st.log.Debug(l.e.st.backend.Pkg+": handed off", "election", l.name, "token", n.Token, "to", li.Value, "term", li.Token.Seq)
			if instead != nil {
				return li, l.fail(op, fmt.Errorf("%w; handed over to the next in line, %q, instead", instead, li.Value))
			}
			return li, nil
		}
		if unknown {
			// Whether the write happened is not known: the delete below
			// is a no-op if it did, and ends the term if it did not (a
			// copy of the write still on its way then fails its compare).
			// An entry found gone meanwhile (its follower's report, held
			// back so far, or the delete's) is reported as a loss: it may
			// have been this write's doing, or a forced end's before it,
			// and the safe side of the doubt is the loss.
			n.resumeLoss()
			return distlock.LeaderInfo{}, l.vacate(ctx, op, "", fmt.Errorf("the handoff to %q may or may not have been made: %w", next.Value, err))
		}
		// Refused: the handoff did not happen, and no copy of its write
		// can happen any more.
		switch {
		case try >= handoffTries:
			n.resumeLoss()
			return distlock.LeaderInfo{}, l.vacate(ctx, op, "", fmt.Errorf("the handoff was refused %d times, the last to %q: %w", try, next.Value, err))
		case ctx.Err() != nil:
			n.resumeLoss()
			return distlock.LeaderInfo{}, l.vacate(ctx, op, "", fmt.Errorf("the handoff to %q was refused (%w), and the call's context ended before another pick: %w", next.Value, err, context.Cause(ctx)))
		}
		if !read {
			if st, err = l.e.d.ReadElection(ctx, l.name); err != nil {
				n.resumeLoss()
				return distlock.LeaderInfo{}, l.vacate(ctx, op, "", fmt.Errorf("the handoff to %q was refused, and the election could not be read again: %w", next.Value, err))
			}
		}
		if lead, ok := st.leader(); !ok || lead.Key != n.Key || st.Term != n.Token {
			// Deposed meanwhile (forced out): the term ended without this
			// leader's write.
			n.resumeLoss()
			_ = l.Unlock(ctx)
			return distlock.LeaderInfo{}, l.notLeader(op, fmt.Errorf("%w: the term record no longer names a live entry %s", distlock.ErrLost, n.Key))
		}
		var found bool
		if next, found = st.next(n.Key, to); !found && to != "" {
			instead = fmt.Errorf("%w: no waiting candidate has the value %q any more (it left before the handoff's write)", distlock.ErrNoCandidate, to)
			next, found = st.next(n.Key, "")
		}
		if !found {
			n.resumeLoss()
			return distlock.LeaderInfo{}, l.vacate(ctx, op, "", cmp.Or(instead, fmt.Errorf("%w: no other candidate waits any more", distlock.ErrNoCandidate)))
		}
	}
}

// resolveTimeout bounds how long a step-down whose write got no answer
// keeps sending it again to learn its outcome, beyond the call's
// context if need be: a term whose outcome is not learnt is ended by a
// delete, and a ZooKeeper client that lost its connection redials only
// a second later.
const resolveTimeout = 2 * AbandonTimeout

// handOffWrite sends a step-down's write (Elections.HandOff) and, while
// no answer comes, sends the same write again, for up to resolveTimeout
// beyond the first failure. Its compares (the record's version, both
// entries' identities) make at most one copy apply, and once one is
// refused no other can apply later: a record's version only grows and a
// deleted entry never comes back. So the first answer settles it: a
// success is this handoff's; a refusal (ErrTermMoved) after resent means
// an earlier copy may have been applied (a read tells), without resent
// that the handoff did not happen. Any other error: no answer came.
func (l *leadership) handOffWrite(ctx context.Context, st ElectionState, next Contender) (term int64, resent bool, err error) {
	d, n := l.e.d, l.n
	if term, err = d.HandOff(ctx, n, st, next); err == nil || errors.Is(err, ErrTermMoved) {
		return term, false, err
	}
	// A driver's store error may keep a Txn of etcd's going on the server
	// after the client gave up, ordered after nothing this client sends
	// next: a read would not prove it did not happen, another copy does.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveTimeout)
	defer cancel()
	for l.e.st.Err() == nil && ctxwait.Sleep(rctx, RetryDelay) == nil {
		t, e := d.HandOff(rctx, n, st, next)
		if e == nil || errors.Is(e, ErrTermMoved) {
			return t, true, e
		}
		if rctx.Err() == nil {
			err = e
		}
	}
	return 0, true, err
}

// pick decides, before any write, whom stepDown hands over to: from the
// state the leader's watch last saw, which costs the handoff no read (its
// write compares everything it relies on), or, when that state cannot
// settle it (a candidate it may not have seen yet, a record it may not
// have seen move), from a fresh read. found is false when no candidate
// (with value to, if set) waits. The error wraps distlock.ErrNotLeader
// when the term record no longer names this leader's live entry.
func (l *leadership) pick(ctx context.Context, op distlock.Op, to string) (st ElectionState, next Contender, found bool, err error) {
	n := l.n
	cached := l.state.Load()
	for try := 0; ; try++ {
		fresh := cached == nil || try > 0
		if fresh {
			if st, err = l.e.d.ReadElection(ctx, l.name); err != nil {
				return st, next, false, l.fail(op, err)
			}
		} else {
			st = *cached
		}
		next, found = st.next(n.Key, to)
		lead, ok := st.leader()
		leads := ok && lead.Key == n.Key && st.Term == n.Token
		if !fresh && (!found || !leads) {
			continue
		}
		if !leads {
			// The record moved on, or names an entry deleted by someone
			// else (forced): this term is over, whatever the entry's
			// watch has told the Lease so far.
			return st, next, false, l.notLeader(op, fmt.Errorf("%w: the term record no longer names a live entry %s", distlock.ErrLost, n.Key))
		}
		return st, next, found, nil
	}
}

// vacate ends the term by deleting the leader's entry (the Lease's Unlock,
// which deletes it only if it is still this term's), leaving the term
// vacant for the next candidate to claim: a Resign with nobody to hand
// over to, and every handoff that could not be made once Done had closed.
// how is Done's cause if Done is still open ("" says why). why, if not
// nil, is why no handoff was made: a HandOff reports it; a Resign, whose
// aim the delete reaches, reports only a delete that failed.
func (l *leadership) vacate(ctx context.Context, op distlock.Op, how string, why error) error {
	if how == "" {
		how = fmt.Sprintf("stepped down: %v; the entry is deleted, the term left vacant", why)
	}
	l.lose(l.fail(op, &steppedDown{op, how}))
	err := l.Unlock(ctx)
	switch {
	case err != nil && why != nil:
		return l.fail(op, fmt.Errorf("%w; stepping down by deleting the entry instead failed too: %w", why, entryDelete{err}))
	case errors.Is(err, distlock.ErrLost):
		// The delete found the term lost before it.
		return l.notLeader(op, err)
	case err != nil:
		return l.fail(op, entryDelete{err})
	case why != nil && op != distlock.OpResign:
		return l.fail(op, fmt.Errorf("%w; stepped down by deleting the entry instead (the term is vacant until the next candidate claims it)", why))
	}
	if why != nil {
		l.e.st.log.Info(l.e.st.backend.Pkg+": resigned by deleting the entry", "election", l.name, "token", l.n.Token, "why", why)
	}
	return nil
}
