package locktest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/internal/proc"
)

// The election's handoff, priority and preemption cases (registered in
// electionCases).

// ElectionOpener is a Session whose elections take options
// (distlock.WithPreemptGrace): the preemption cases need one. Session's
// Election is ElectionWith with no options.
type ElectionOpener interface {
	// ElectionWith returns the election called name on this session,
	// made with opts.
	ElectionWith(name string, opts ...distlock.ElectionOption) (Elector, error)
}

// TermCoalescer is a Backend whose Observe may leave out a term that began
// and ended between two of its reads: ZooKeeper's watches fire once and
// are set again by a read, which sees only the state of that moment.
// Unless a Backend says so, Observe must report every term that began.
type TermCoalescer interface {
	// CoalescesTerms reports whether Observe may leave terms out.
	CoalescesTerms() bool
}

func electionWithOptions(t *testing.T, s Session, name string, opts ...distlock.ElectionOption) Elector {
	t.Helper()
	o, ok := s.(ElectionOpener)
	if !ok {
		t.Fatalf("the backend's session %T is no ElectionOpener: the preemption cases need elections with options", s)
	}
	e, err := o.ElectionWith(name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// campaignAsyncWith is CampaignAsync with campaign options.
func campaignAsyncWith(ctx context.Context, e distlock.Elector, value string, opts ...distlock.CampaignOption) <-chan Campaigned {
	ch := make(chan Campaigned, 1)
	go func() {
		l, err := e.Campaign(ctx, value, opts...)
		ch <- Campaigned{l, err}
	}()
	return ch
}

// stillQueued fails if the background Campaign of value has returned.
// Called once the new leader's Campaign has returned; a candidate whose
// Campaign returns later than this check but too early is caught when it
// is finally chosen: its token is then not the one its handoff gave.
func stillQueued(t *testing.T, value string, ch <-chan Campaigned, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: candidate %s's Campaign returned (err %v) while it was not chosen", what, value, r.Err)
	default:
	}
}

// stillLeads checks that l leads: its Done open, its Err nil, a Proclaim
// of value goes through, and Leader says so.
func stillLeads(t *testing.T, e Elector, l distlock.Leadership, value string, what string) {
	t.Helper()
	select {
	case <-l.Done():
		t.Fatalf("%s: the leader's Done closed: %v", what, l.Err())
	default:
	}
	if err := l.Err(); err != nil {
		t.Fatalf("%s: the leader's Err: %v", what, err)
	}
	if err := l.Proclaim(Ctx(t), value); err != nil {
		t.Fatalf("%s: the leader's Proclaim: %v", what, err)
	}
	wantLeader(t, e, leaderInfo(l, value), what)
}

func leaderWithPriority(l distlock.Leadership, value string, prio int) distlock.LeaderInfo {
	return distlock.LeaderInfo{Value: value, Token: l.Token(), Priority: prio}
}

// released checks that l's Done closed, with an Err wrapping ErrReleased,
// and that it can no longer hand off.
func released(t *testing.T, l distlock.Leadership, what string) {
	t.Helper()
	Recv(t, l.Done(), what+": the old leader's Done")
	if err := l.Err(); !errors.Is(err, distlock.ErrReleased) {
		t.Fatalf("%s: the old leader's Err: %v, want ErrReleased", what, err)
	}
	_, err := l.HandOff(Ctx(t), "")
	wantNotLeader(t, err, what+": the old leader's HandOff")
}

// electionHandOffNamed: a leader hands off, to the next in line or to a
// candidate it names, with five candidates waiting, each on a session of
// its own. The chosen one's Campaign returns with the token HandOff
// returned, newer than the old; no other Campaign returns and every other
// candidate stays queued; the old leader is released; Leader agrees. Hand
// by hand, every candidate leads once.
func electionHandOffNamed(t *testing.T, b Backend) {
	const name, n = "handoff", 5
	els := make([]Elector, n+1)
	for i := range els {
		els[i] = election(t, b.Session(t), name)
	}
	leader, value := MustCampaign(t, els[0], "c0"), "c0"
	waiting := map[string]<-chan Campaigned{}
	var line []string // the waiting candidates, oldest first
	for i := 1; i <= n; i++ {
		v := fmt.Sprint("c", i)
		waiting[v] = CampaignAsync(Ctx(t), els[i], v)
		line = append(line, v)
		b.WaitEntries(t, name, i+1)
	}
	for _, to := range []string{"", "c4", "", "c5", "c3"} {
		want := to
		if want == "" {
			want = line[0]
		}
		what := fmt.Sprintf("%s hands off to %q", value, to)
		li, err := leader.HandOff(Ctx(t), to)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if li.Value != want || li.Priority != 0 || !li.Token.Newer(leader.Token()) {
			t.Fatalf("%s: HandOff returned %+v; want %s with a token newer than %v", what, li, want, leader.Token())
		}
		next := Leads(t, waiting[want], want+"'s Campaign")
		if next.Token() != li.Token {
			t.Fatalf("%s: %s leads with token %v, HandOff said %v", what, want, next.Token(), li.Token)
		}
		delete(waiting, want)
		line = slices.DeleteFunc(line, func(v string) bool { return v == want })
		for v, ch := range waiting {
			stillQueued(t, v, ch, what)
		}
		released(t, leader, what)
		wantLeader(t, els[0], li, what)
		wantEntries(t, b, name, len(line)+1, what)
		leader, value = next, want
	}
	MustResign(t, leader)
	wantEntries(t, b, name, 0, "the last leader resigned")
}

// electionHandOffVanished: a HandOff to a candidate that left — its
// session closed, its Campaign cancelled, its session ended on the server
// — or to a value nobody ever had fails with ErrNoCandidate, and the
// leader goes on leading; a HandOff to the next in line then reaches the
// one candidate left.
func electionHandOffVanished(t *testing.T, b Backend) {
	const name = "vanished"
	e := election(t, b.Session(t), name)
	a := MustCampaign(t, e, "a")
	closed, ended := b.Session(t), b.Session(t)
	rClosed := CampaignAsync(Ctx(t), election(t, closed, name), "closed")
	b.WaitEntries(t, name, 2)
	cctx, cancel := context.WithCancel(Ctx(t))
	defer cancel()
	rCancelled := CampaignAsync(cctx, election(t, b.Session(t), name), "cancelled")
	b.WaitEntries(t, name, 3)
	rEnded := CampaignAsync(Ctx(t), election(t, ended, name), "ended")
	b.WaitEntries(t, name, 4)
	rLast := CampaignAsync(Ctx(t), election(t, b.Session(t), name), "last")
	b.WaitEntries(t, name, 5)

	closed.Close(t)
	if r := Recv(t, rClosed, "the closed candidate's Campaign"); !errors.Is(r.Err, distlock.ErrSessionClosed) {
		t.Fatalf("Campaign after its session closed: %v, want ErrSessionClosed", r.Err)
	}
	cancel()
	if r := Recv(t, rCancelled, "the cancelled Campaign"); !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("cancelled Campaign: %v, want context.Canceled", r.Err)
	}
	ended.End(t)
	if r := Recv(t, rEnded, "the Campaign whose session ended"); !errors.Is(r.Err, distlock.ErrEntryGone) && !errors.Is(r.Err, distlock.ErrSessionExpired) {
		t.Fatalf("Campaign after its session ended: %v, want ErrEntryGone or ErrSessionExpired", r.Err)
	}
	wantEntries(t, b, name, 2, "three candidates gone")

	for _, to := range []string{"closed", "cancelled", "ended", "nobody"} {
		what := fmt.Sprintf("HandOff to %q", to)
		li, err := a.HandOff(Ctx(t), to)
		if !errors.Is(err, distlock.ErrNoCandidate) || errors.Is(err, distlock.ErrNotLeader) {
			t.Fatalf("%s: %+v, %v; want ErrNoCandidate", what, li, err)
		}
		stillLeads(t, e, a, "a after "+to, what)
		stillQueued(t, "last", rLast, what)
	}
	li, err := a.HandOff(Ctx(t), "")
	if err != nil || li.Value != "last" {
		t.Fatalf("HandOff to the next in line: %+v, %v; want last", li, err)
	}
	last := Leads(t, rLast, "the last candidate")
	if last.Token() != li.Token || !li.Token.Newer(a.Token()) {
		t.Fatalf("the last candidate leads with %v; HandOff said %v, after %v", last.Token(), li.Token, a.Token())
	}
	released(t, a, "after the handoff")
	MustResign(t, last)
	wantEntries(t, b, name, 0, "after the resign")
}

// electionHandOffNobody: with no candidate waiting, HandOff fails with
// ErrNoCandidate, whatever it asks for (its own value too), and the leader
// goes on leading; Resign then leaves no entry and no leader.
func electionHandOffNobody(t *testing.T, b Backend) {
	const name = "alone"
	e := election(t, b.Session(t), name)
	a := MustCampaign(t, e, "a")
	for _, to := range []string{"", "a", "b"} {
		what := fmt.Sprintf("HandOff to %q with nobody waiting", to)
		li, err := a.HandOff(Ctx(t), to)
		if !errors.Is(err, distlock.ErrNoCandidate) || errors.Is(err, distlock.ErrNotLeader) {
			t.Fatalf("%s: %+v, %v; want ErrNoCandidate", what, li, err)
		}
		stillLeads(t, e, a, "a", what)
	}
	wantEntries(t, b, name, 1, "after the failed handoffs")
	MustResign(t, a)
	Recv(t, a.Done(), "Done after Resign")
	if !errors.Is(a.Err(), distlock.ErrReleased) {
		t.Fatalf("Err after Resign: %v, want ErrReleased", a.Err())
	}
	wantEntries(t, b, name, 0, "resigned with nobody waiting")
	wantNoLeader(t, e, "resigned with nobody waiting")
	_, err := a.HandOff(Ctx(t), "")
	wantNotLeader(t, err, "HandOff after Resign")
}

// handed is what a HandOff running in the background returned.
type handed struct {
	li  distlock.LeaderInfo
	err error
}

// handOffAsync runs l.HandOff(ctx, to) in a goroutine once start is
// closed.
func handOffAsync(ctx context.Context, l distlock.Leadership, to string, start <-chan struct{}) <-chan handed {
	ch := make(chan handed, 1)
	go func() {
		<-start
		li, err := l.HandOff(ctx, to)
		ch <- handed{li, err}
	}()
	return ch
}

// raceOffsets spread a session's end across a HandOff's read and write,
// one round each: at once, then after ever longer delays, the last ones
// likely after the HandOff returned. They only vary the interleaving;
// every round's checks hold whichever came first.
var raceOffsets = []time.Duration{0, 0, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond, 16 * time.Millisecond, 32 * time.Millisecond}

// endAfter ends s once start is closed and offset has passed.
func endAfter(t *testing.T, s Session, start chan struct{}, offset time.Duration) {
	t.Helper()
	close(start)
	if offset > 0 {
		<-time.After(offset)
	}
	s.End(t)
}

// electionHandOffRacesLeaderLoss: the leader's session ends on the server
// while its HandOff is on the way, round after round. Either the handoff
// was made — the next in line leads with the token it returned, and the
// old leader is released — or it failed and the old leader does not lead
// (lost, or stepped down before the write and lost after); in
// both the next in line leads (claiming the vacant term), newer, alone:
// the candidate behind it still waits, and observers never see a token go
// back.
func electionHandOffRacesLeaderLoss(t *testing.T, b Backend) {
	const name = "loss-race"
	o := Observe(t, election(t, b.Session(t), name))
	o.Await(t, distlock.LeaderInfo{})
	var terms []observedTerm
	outcomes := map[string]int{}
	for round, offset := range raceOffsets {
		ls := b.Session(t)
		lv := fmt.Sprint("leader", round)
		leader := MustCampaign(t, election(t, ls, name), lv)
		terms = append(terms, observedTerm{leader.Token(), []string{lv}, 0})
		e1, e2 := election(t, b.Session(t), name), election(t, b.Session(t), name)
		r1 := CampaignAsync(Ctx(t), e1, "first")
		b.WaitEntries(t, name, 2)
		r2 := CampaignAsync(Ctx(t), e2, "second")
		b.WaitEntries(t, name, 3)

		what := fmt.Sprintf("round %d (the session ended %v after the HandOff began)", round, offset)
		start := make(chan struct{})
		res := handOffAsync(Ctx(t), leader, "", start)
		endAfter(t, ls, start, offset)
		h := Recv(t, res, what+": HandOff")
		Recv(t, leader.Done(), what+": the old leader's Done")
		first := Leads(t, r1, what+": the next in line")
		if !first.Token().Newer(leader.Token()) {
			t.Fatalf("%s: the next in line leads with %v, not newer than %v", what, first.Token(), leader.Token())
		}
		if h.err == nil {
			outcomes["handed off"]++
			if h.li != leaderInfo(first, "first") {
				t.Fatalf("%s: HandOff returned %+v, but %+v leads", what, h.li, leaderInfo(first, "first"))
			}
			if !errors.Is(leader.Err(), distlock.ErrReleased) {
				t.Fatalf("%s: the leader that handed off: Err %v, want ErrReleased", what, leader.Err())
			}
		} else {
			// Lost before it could step down, or stepped down (Done closed
			// before the write) and then lost the session: either way it
			// does not lead.
			outcomes["lost first"]++
			if err := leader.Err(); !errors.Is(err, distlock.ErrLost) && !errors.Is(err, distlock.ErrReleased) {
				t.Fatalf("%s: HandOff failed (%v), but the leader's Err is %v, want ErrLost or ErrReleased", what, h.err, err)
			}
		}
		terms = append(terms, observedTerm{first.Token(), []string{"first"}, 0})
		if err := first.Err(); err != nil {
			t.Fatalf("%s: the next in line lost its term to its predecessor's end: %v", what, err)
		}
		stillQueued(t, "second", r2, what)
		wantLeader(t, e2, leaderInfo(first, "first"), what)
		wantEntries(t, b, name, 2, what+": the next in line and the one behind")

		MustResign(t, first)
		second := Leads(t, r2, what+": the second candidate")
		terms = append(terms, observedTerm{second.Token(), []string{"second"}, 0})
		MustResign(t, second)
		wantEntries(t, b, name, 0, what+": everyone resigned")
	}
	t.Logf("outcomes over %d rounds: %v", len(raceOffsets), outcomes)
	// A last term closes the sequence: everything before it was sent by
	// the time Observe sends it.
	end := MustCampaign(t, election(t, b.Session(t), name), "end")
	terms = append(terms, observedTerm{end.Token(), []string{"end"}, 0})
	checkObserved(t, b, o.Await(t, leaderInfo(end, "end")), terms)
	MustResign(t, end)
}

// electionHandOffRacesSuccessorLoss: the next in line's session ends on
// the server while the leader hands off to it, round after round. The
// handoff reaches it (which then loses at once) or, finding it gone, the
// candidate behind it; either way the leader is released and the one
// behind ends up leading, newer than every earlier term.
func electionHandOffRacesSuccessorLoss(t *testing.T, b Backend) {
	const name = "successor-race"
	outcomes := map[string]int{}
	for round, offset := range raceOffsets {
		what := fmt.Sprintf("round %d (x's session ended %v after the HandOff began)", round, offset)
		leader := MustCampaign(t, election(t, b.Session(t), name), "leader")
		xs := b.Session(t)
		rx := CampaignAsync(Ctx(t), election(t, xs, name), "x")
		b.WaitEntries(t, name, 2)
		ey := election(t, b.Session(t), name)
		ry := CampaignAsync(Ctx(t), ey, "y")
		b.WaitEntries(t, name, 3)

		start := make(chan struct{})
		res := handOffAsync(Ctx(t), leader, "", start)
		endAfter(t, xs, start, offset)
		h := Recv(t, res, what+": HandOff")
		if h.err != nil {
			t.Fatalf("%s: HandOff with y waiting: %v", what, h.err)
		}
		released(t, leader, what)
		x := Recv(t, rx, what+": x's Campaign")
		y := Leads(t, ry, what+": y")
		switch h.li.Value {
		case "x":
			outcomes["to x, then lost"]++
			if x.Err == nil {
				if x.Leadership.Token() != h.li.Token {
					t.Fatalf("%s: x leads with %v, HandOff said %v", what, x.Leadership.Token(), h.li.Token)
				}
				Recv(t, x.Leadership.Done(), what+": x's Done")
				if !errors.Is(x.Leadership.Err(), distlock.ErrLost) {
					t.Fatalf("%s: x's session ended: Err %v, want ErrLost", what, x.Leadership.Err())
				}
			}
			if !y.Token().Newer(h.li.Token) {
				t.Fatalf("%s: y leads with %v, not newer than x's %v", what, y.Token(), h.li.Token)
			}
		case "y":
			outcomes["to y"]++
			if x.Err == nil {
				t.Fatalf("%s: the handoff went to y, yet x's Campaign returned leading (%v)", what, x.Leadership.Token())
			}
			if y.Token() != h.li.Token {
				t.Fatalf("%s: y leads with %v, HandOff said %v", what, y.Token(), h.li.Token)
			}
		default:
			t.Fatalf("%s: HandOff returned %+v", what, h.li)
		}
		if !y.Token().Newer(leader.Token()) {
			t.Fatalf("%s: y's token %v not newer than the leader's %v", what, y.Token(), leader.Token())
		}
		wantLeader(t, ey, leaderInfo(y, "y"), what)
		wantEntries(t, b, name, 1, what+": y's entry only")
		MustResign(t, y)
	}
	t.Logf("outcomes over %d rounds: %v", len(raceOffsets), outcomes)
}

// electionPriorityOrder: waiting candidates lead in order of priority,
// the oldest first among equals, whatever order they came in, and Leader
// reports each leader's priority. Priorities out of range are refused,
// leaving no entry. The first leader's priority is above all, so that
// nobody preempts it.
func electionPriorityOrder(t *testing.T, b Backend) {
	const name = "priority"
	e := election(t, b.Session(t), name)
	leader, err := e.Campaign(Ctx(t), "top", distlock.WithPriority(distlock.MaxPriority))
	if err != nil {
		t.Fatal(err)
	}
	wantLeader(t, e, leaderWithPriority(leader, "top", distlock.MaxPriority), "the first leader")
	for _, p := range []int{distlock.MaxPriority + 1, -distlock.MaxPriority - 1} {
		if l, err := e.Campaign(Ctx(t), "out", distlock.WithPriority(p)); err == nil {
			l.Resign(Ctx(t))
			t.Fatalf("Campaign with priority %d led", p)
		}
	}
	wantEntries(t, b, name, 1, "after the Campaigns out of range")

	type candidate struct {
		value string
		prio  int
	}
	queued := []candidate{{"p1", 1}, {"p5-first", 5}, {"m2", -2}, {"p5-second", 5}, {"p3", 3}}
	waiting := map[string]<-chan Campaigned{}
	for i, c := range queued {
		waiting[c.value] = campaignAsyncWith(Ctx(t), election(t, b.Session(t), name), c.value, distlock.WithPriority(c.prio))
		b.WaitEntries(t, name, i+2)
	}
	for _, c := range []candidate{{"p5-first", 5}, {"p5-second", 5}, {"p3", 3}, {"p1", 1}, {"m2", -2}} {
		what := fmt.Sprintf("after the resign, %s of priority %d", c.value, c.prio)
		MustResign(t, leader)
		next := Leads(t, waiting[c.value], what)
		delete(waiting, c.value)
		for v, ch := range waiting {
			stillQueued(t, v, ch, what)
		}
		if !next.Token().Newer(leader.Token()) {
			t.Fatalf("%s: token %v not newer than %v", what, next.Token(), leader.Token())
		}
		wantLeader(t, e, leaderWithPriority(next, c.value, c.prio), what)
		leader = next
	}
	MustResign(t, leader)
	wantEntries(t, b, name, 0, "everyone resigned")
}

// electionPreemptCooperative: a candidate of a higher priority than the
// revocable leader's asks it to step down, jumping a candidate of the
// leader's priority that waited longer. The leader hears it on its Done
// (a *RevokedError for its term), still leads and writes until it
// resigns, and its Resign hands over to the preemptor, whose token then
// fences it out; the revocation record says released.
func electionPreemptCooperative(t *testing.T, b Backend) {
	const name = "preempt-coop"
	e := election(t, b.Session(t), name)
	low := MustCampaign(t, election(t, revocable(t, b), name), "low")
	fence := newFence(t, name)
	if err := fence.Admit(Ctx(t), low.Token()); err != nil {
		t.Fatal(err)
	}
	rPeer := CampaignAsync(Ctx(t), election(t, b.Session(t), name), "peer")
	b.WaitEntries(t, name, 2)
	rHigh := campaignAsyncWith(Ctx(t), electionWithOptions(t, b.Session(t), name, distlock.WithPreemptGrace(time.Minute)), "high", distlock.WithPriority(10))

	Recv(t, low.Done(), "the preempted leader's Done")
	var re *distlock.RevokedError
	if err := low.Err(); !errors.As(err, &re) || !errors.Is(err, distlock.ErrRevoked) || errors.Is(err, distlock.ErrLost) {
		t.Fatalf("the preempted leader's Err: %v, want a *RevokedError (ErrRevoked, not ErrLost)", err)
	}
	if re.Token != low.Token().String() || !strings.Contains(re.Reason, `"high"`) || re.Grace != time.Minute || !re.Force {
		t.Fatalf("RevokedError %+v: want token %s, the preemptor named in the reason, a minute's grace, forced after it", re.Revocation, low.Token())
	}
	// It leads until it steps down.
	wantLeader(t, e, leaderInfo(low, "low"), "the preempted leader before it resigned")
	if err := fence.Admit(Ctx(t), low.Token()); err != nil {
		t.Fatalf("the preempted leader's write before it resigned: %v", err)
	}
	stillQueued(t, "high", rHigh, "before the preempted leader resigned")
	stillQueued(t, "peer", rPeer, "before the preempted leader resigned")

	MustResign(t, low)
	high := Leads(t, rHigh, "the preemptor")
	if !high.Token().Newer(low.Token()) {
		t.Fatalf("the preemptor's token %v not newer than %v", high.Token(), low.Token())
	}
	stillQueued(t, "peer", rPeer, "the preemptor leads")
	wantLeader(t, e, leaderWithPriority(high, "high", 10), "the preemptor leads")
	if err := fence.Admit(Ctx(t), high.Token()); err != nil {
		t.Fatal(err)
	}
	if err := fence.Admit(Ctx(t), low.Token()); !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("the preempted leader's late write: %v, want ErrStale", err)
	}
	all, err := b.Revocations(Ctx(t), name)
	if err != nil || len(all) != 1 || all[0].Token != low.Token().String() || all[0].Outcome != distlock.RevokeReleased {
		t.Fatalf("Revocations: %+v, %v; want one released record for %s", all, err, low.Token())
	}

	MustResign(t, high)
	peer := Leads(t, rPeer, "the peer after the preemptor resigned")
	if peer.Err() != nil {
		t.Fatalf("the peer, of the leader's priority, was revoked: %v", peer.Err())
	}
	MustResign(t, peer)
	wantEntries(t, b, name, 0, "everyone resigned")
}

// electionPreemptForced: a leader that does not follow revocations is
// forced out by a candidate of higher priority once its election's
// preempt grace is over: its entry is deleted (Done: ErrLost, ErrEntryGone),
// the preemptor leads with a newer token, the fence it wrote through
// refuses the old leader, whose late calls touch nothing.
func electionPreemptForced(t *testing.T, b Backend) {
	const name = "preempt-forced"
	e := election(t, b.Session(t), name)
	low := MustCampaign(t, election(t, b.Session(t), name), "low")
	fence := newFence(t, name)
	if err := fence.Admit(Ctx(t), low.Token()); err != nil {
		t.Fatal(err)
	}
	rHigh := campaignAsyncWith(Ctx(t), electionWithOptions(t, b.Session(t), name, distlock.WithPreemptGrace(200*time.Millisecond)), "high", distlock.WithPriority(10))
	high := Leads(t, rHigh, "the preemptor")
	Recv(t, low.Done(), "the forced leader's Done")
	if err := low.Err(); !errors.Is(err, distlock.ErrLost) || !errors.Is(err, distlock.ErrEntryGone) {
		t.Fatalf("the forced leader's Err: %v, want ErrLost and ErrEntryGone", err)
	}
	if !high.Token().Newer(low.Token()) {
		t.Fatalf("the preemptor's token %v not newer than %v", high.Token(), low.Token())
	}
	wantLeader(t, e, leaderWithPriority(high, "high", 10), "the preemptor leads")
	if err := fence.Admit(Ctx(t), high.Token()); err != nil {
		t.Fatal(err)
	}
	if err := fence.Admit(Ctx(t), low.Token()); !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("the forced leader's late write: %v, want ErrStale", err)
	}
	wantNotLeader(t, low.Proclaim(Ctx(t), "stale"), "Proclaim by the forced leader")
	_, err := low.HandOff(Ctx(t), "")
	wantNotLeader(t, err, "HandOff by the forced leader")
	wantNotLeader(t, low.Resign(Ctx(t)), "Resign by the forced leader")
	wantLeader(t, e, leaderWithPriority(high, "high", 10), "after the forced leader's late calls")
	wantEntries(t, b, name, 1, "the forced leader's late calls touched the preemptor's entry")
	all, err := b.Revocations(Ctx(t), name)
	if err != nil || len(all) != 1 || all[0].Token != low.Token().String() || all[0].Outcome != distlock.RevokeForced {
		t.Fatalf("Revocations: %+v, %v; want one forced record for %s", all, err, low.Token())
	}
	MustResign(t, high)
	wantEntries(t, b, name, 0, "the preemptor resigned")
}

// observedTerm is a term as a Campaign returned it: its token, the values
// its leader had in order (its Campaign's, then its Proclaims'), and its
// priority.
type observedTerm struct {
	token  distlock.Token
	values []string
	prio   int
}

// checkObserved checks what an Observe saw against the terms Campaigns
// returned, in the order they began: every leader seen is one of those
// terms, with one of its values and its priority; terms and values come
// in order, never back (a term seen again after another, or after "no
// leader", would be two terms with one token); and, unless the backend
// coalesces terms, every term is seen.
func checkObserved(t *testing.T, b Backend, seen []distlock.LeaderInfo, terms []observedTerm) {
	t.Helper()
	index := map[distlock.Token]int{}
	for i, tm := range terms {
		if i > 0 && !tm.token.Newer(terms[i-1].token) {
			t.Fatalf("term %d's token %v is not newer than term %d's %v", i, tm.token, i-1, terms[i-1].token)
		}
		index[tm.token] = i
	}
	seenTerm := make([]bool, len(terms))
	last, lastValue := -1, -1
	for k, li := range seen {
		if li.NoLeader() {
			if last >= 0 {
				lastValue = len(terms[last].values) // the term, if seen again, would go back
			}
			continue
		}
		i, ok := index[li.Token]
		if !ok {
			t.Fatalf("Observe reported %+v (#%d), a token no Campaign returned; saw %v", li, k, seen)
		}
		v := slices.Index(terms[i].values, li.Value)
		if v < 0 || li.Priority != terms[i].prio {
			t.Fatalf("Observe reported %+v (#%d): term %d's leader had the values %q, priority %d; saw %v", li, k, i, terms[i].values, terms[i].prio, seen)
		}
		if i < last || i == last && v <= lastValue {
			t.Fatalf("Observe went back at #%d to %+v; saw %v", k, li, seen)
		}
		last, lastValue = i, v
		seenTerm[i] = true
	}
	if c, ok := b.(TermCoalescer); ok && c.CoalescesTerms() {
		return
	}
	for i, ok := range seenTerm {
		if !ok {
			t.Fatalf("Observe left out term %d (%v, %q); saw %v", i, terms[i].token, terms[i].values, seen)
		}
	}
}

// electionObserveHandOffs: Observe follows a run of changes made one after
// another without waiting for it — a handoff to a named candidate, a
// Resign to the next in line, Proclaims, a preemption forced at once, a
// claim after a leader's session ended — and reports them in order: its
// tokens only grow, each token with the values its term had in order;
// every term (unless the backend coalesces them), and the current leader
// last.
func electionObserveHandOffs(t *testing.T, b Backend) {
	const name = "observe-handoffs"
	o := Observe(t, election(t, b.Session(t), name))
	o.Await(t, distlock.LeaderInfo{})
	var terms []observedTerm
	term := func(l distlock.Leadership, prio int, values ...string) {
		terms = append(terms, observedTerm{l.Token(), values, prio})
	}

	a := MustCampaign(t, election(t, b.Session(t), name), "a")
	rb := CampaignAsync(Ctx(t), election(t, b.Session(t), name), "b")
	b.WaitEntries(t, name, 2)
	rc := CampaignAsync(Ctx(t), election(t, b.Session(t), name), "c")
	b.WaitEntries(t, name, 3)
	if err := a.Proclaim(Ctx(t), "a2"); err != nil {
		t.Fatal(err)
	}
	term(a, 0, "a", "a2")
	if _, err := a.HandOff(Ctx(t), "c"); err != nil {
		t.Fatal(err)
	}
	c := Leads(t, rc, "c")
	if err := c.Proclaim(Ctx(t), "c2"); err != nil {
		t.Fatal(err)
	}
	term(c, 0, "c", "c2")
	MustResign(t, c)
	lb := Leads(t, rb, "b")
	term(lb, 0, "b")
	// b follows no revocations: a grace of zero forces it out at once.
	ds := b.Session(t)
	d := Leads(t, campaignAsyncWith(Ctx(t), electionWithOptions(t, ds, name, distlock.WithPreemptGrace(0)), "d", distlock.WithPriority(5)), "d, preempting b")
	term(d, 5, "d")
	Recv(t, lb.Done(), "the preempted b's Done")
	re := CampaignAsync(Ctx(t), election(t, b.Session(t), name), "e")
	b.WaitEntries(t, name, 2)
	ds.End(t)
	le := Leads(t, re, "e after d's session ended")
	term(le, 0, "e")
	rf := campaignAsyncWith(Ctx(t), election(t, b.Session(t), name), "f", distlock.WithPriority(-1))
	b.WaitEntries(t, name, 2)
	rg := CampaignAsync(Ctx(t), election(t, b.Session(t), name), "g")
	b.WaitEntries(t, name, 3)
	if _, err := le.HandOff(Ctx(t), "f"); err != nil {
		t.Fatal(err)
	}
	f := Leads(t, rf, "f")
	term(f, -1, "f")
	if _, err := f.HandOff(Ctx(t), ""); err != nil {
		t.Fatal(err)
	}
	g := Leads(t, rg, "g")
	term(g, 0, "g")

	seen := o.Await(t, leaderInfo(g, "g"))
	checkObserved(t, b, seen, terms)
	MustResign(t, g)
	o.Await(t, distlock.LeaderInfo{})
	wantEntries(t, b, name, 0, "everyone gone")
}

// StoppedLeaderPreempted runs the stopped leader's story on a store: a
// leader in a process of its own (the lockholder of spec, in election
// mode) writes through an HTTP fence, then is stopped (SIGSTOP, like a
// long GC pause) while its session stays alive on the server (spec's TTL
// must outlast the test's steps). A candidate of a higher priority,
// campaigning on s through an election whose preempt grace is short,
// forces it out and leads — while the process is still stopped — and
// writes with its newer token. Continued, the old leader writes again and
// is refused as stale, hears it lost, and its Resign reports the loss and
// leaves the new leader be. rv reads the revocation record of the force;
// sessionAlive, if not nil, says whether the stopped leader's session
// (its token's Owner) is still alive on the server.
func StoppedLeaderPreempted(t *testing.T, spec integration.HolderSpec, s Session, rv Revoker, sessionAlive func(ctx context.Context, owner uint64) (bool, error)) {
	const name = "stopped-leader"
	ctx := Ctx(t)
	spec.Lock, spec.Election = name, true
	fence := newFence(t, name)
	var (
		mu     sync.Mutex
		ledger []string
	)
	srv := httptest.NewServer(fencing.Middleware(fence, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		ledger = append(ledger, string(body))
		mu.Unlock()
	})))
	t.Cleanup(srv.Close)
	url := srv.URL + "/ledger"

	h := integration.NewHolder(t, spec)
	old := h.Token()
	e := electionWithOptions(t, s, name, distlock.WithPreemptGrace(500*time.Millisecond))
	wantLeader(t, e, distlock.LeaderInfo{Value: strconv.Itoa(h.PID()), Token: old}, "the process leads")
	holderWrite(t, h, url, "old")

	if err := h.Pause(); err != nil {
		t.Fatal(err)
	}
	high, err := e.Campaign(ctx, "high", distlock.WithPriority(10))
	if err != nil {
		t.Fatalf("the preemptor's Campaign: %v", err)
	}
	defer high.Resign(context.Background())
	if !high.Token().Newer(old) {
		t.Fatalf("the preemptor's token %v is not newer than the stopped leader's %v", high.Token(), old)
	}
	if st, err := proc.State(h.PID()); err != nil || !proc.IsStopped(st) {
		t.Fatalf("the old leader's process when the preemptor led: state %c, %v; want stopped", st, err)
	}
	if sessionAlive != nil {
		if alive, err := sessionAlive(ctx, old.Owner); err != nil || !alive {
			t.Fatalf("the stopped leader's session when the preemptor led: alive %v, %v; want alive (forced out, not expired)", alive, err)
		}
	}
	all, err := rv.Revocations(ctx, name)
	if err != nil || len(all) != 1 || all[0].Token != old.String() || all[0].Outcome != distlock.RevokeForced {
		t.Fatalf("Revocations: %+v, %v; want one forced record for %s", all, err, old)
	}
	if err := fencedPost(ctx, url, high.Token(), "high"); err != nil {
		t.Fatalf("the preemptor's write: %v", err)
	}

	if err := h.Resume(); err != nil {
		t.Fatal(err)
	}
	w, err := h.StartWrite(url, "old, late")
	if err != nil {
		t.Fatal(err)
	}
	if status, err := w.Wait(ctx); status != http.StatusConflict || !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("the old leader's write after it was continued: %d, %v; want 409, ErrStale", status, err)
	}
	Recv(t, h.Lost(), "the old leader's lost event")
	if !strings.Contains(h.LostError(), distlock.ErrLost.Error()) {
		t.Errorf("the old leader's lost event: %q, want it to say %q", h.LostError(), distlock.ErrLost)
	}
	if err := h.Unlock(ctx); !errors.Is(err, distlock.ErrLost) {
		t.Fatalf("the old leader's Resign: %v, want ErrLost", err)
	}
	select {
	case <-high.Done():
		t.Fatalf("the preemptor's leadership ended: %v", high.Err())
	default:
	}
	wantLeader(t, e, leaderWithPriority(high, "high", 10), "after the old leader's Resign")
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"old", "high"}; !slices.Equal(ledger, want) {
		t.Fatalf("the fenced ledger: %q, want %q", ledger, want)
	}
}

// holderWrite makes h write entry to url through the fence, and fails
// unless it was admitted.
func holderWrite(t *testing.T, h *integration.Holder, url, entry string) {
	t.Helper()
	w, err := h.StartWrite(url, entry)
	if err != nil {
		t.Fatal(err)
	}
	if status, err := w.Wait(Ctx(t)); err != nil {
		t.Fatalf("the holder's write %q: %d, %v", entry, status, err)
	}
}

// fencedPost POSTs entry to url with tok in the Fencing-Token header.
func fencedPost(ctx context.Context, url string, tok distlock.Token, entry string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(entry))
	if err != nil {
		return err
	}
	fencing.SetToken(req.Header, tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return fencing.ResponseError(url, resp)
}
