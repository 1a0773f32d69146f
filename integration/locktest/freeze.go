package locktest

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
)

// FreezeStore is what FrozenWaiter needs of a store.
type FreezeStore struct {
	// Holder is the spec of the child process that is frozen: Backend,
	// Endpoints, Prefix and a short TTL (a session timeout, on
	// ZooKeeper). FrozenWaiter sets Lock, Election and Wait.
	Holder integration.HolderSpec
	// Margin is how long after the child's client-side deadline the store
	// can end the child's session at the earliest, as the session's
	// documentation promises: the resumes are swept across
	// [deadline, deadline+Margin). etcd: a fifth of the TTL; ZooKeeper:
	// an eighth of the session timeout (the margin's floor).
	Margin time.Duration
	// NewSession opens a session of the test's own (for the child's
	// predecessor and the waiter behind it; a TTL of several seconds),
	// closed when the test ends. It is called from the test's goroutine.
	NewSession func(t *testing.T) Session
	// Queue reads the store's queues: the store's Admin, on the same
	// prefix as Holder's.
	Queue QueueReader
}

// QueueReader reads lock queues, as recipe.Admin does.
type QueueReader interface {
	// Inspect returns lock name's queue now.
	Inspect(ctx context.Context, name string) ([]distlock.QueueEntry, error)
	// WatchQueue calls f with lock name's queue now and after every
	// change, until ctx ends or f fails.
	WatchQueue(ctx context.Context, name string, f func([]distlock.QueueEntry) error) error
}

// FreezeTriesEnv names the environment variable that sets how many tries
// FrozenWaiter makes of each timing of each case (default
// DefaultFreezeTries; 20 is the full sweep).
const FreezeTriesEnv = "DISTLOCK_FREEZE_TRIES"

// DefaultFreezeTries is how many tries FrozenWaiter makes of each timing
// of each case without FreezeTriesEnv: few enough for the default test
// run (about half a minute per store).
const DefaultFreezeTries = 3

// freezeOffsets are where in [deadline, deadline+Margin) the child is
// resumed, as fractions of Margin.
var freezeOffsets = []float64{0.05, 0.30, 0.55, 0.80}

// freezeLanes is how many tries run at once (each a child process and a
// lock of its own).
const freezeLanes = 4

// frozenKind is one way a frozen waiter is handed the lock.
type frozenKind struct {
	name     string
	election bool
	handOff  bool // the leader hands off to the child by its value, rather than resigning
}

var frozenKinds = []frozenKind{
	{name: "LockUnlock"},
	{name: "CampaignResign", election: true},
	{name: "CampaignHandOff", election: true, handOff: true},
}

// FrozenWaiter stops a child process with SIGSTOP while it waits (a Mutex
// Lock, an Election Campaign), releases its predecessor meanwhile (Unlock;
// Resign, or HandOff to the child by its value), and continues the child
// after its session's client-side deadline but before the store can end
// its session, at several offsets across that window (freezeOffsets, as
// fractions of FreezeStore.Margin). Each try checks that:
//
//   - the child's Lock (Campaign) fails with an error matching
//     distlock.ErrSessionExpired: it never returns a lease past its
//     session's deadline, although the store made it the holder;
//   - the child's session ends and none of its entries is left in the
//     queue;
//   - the waiter queued behind the child (in this process) acquires, with
//     a newer token than the predecessor's (and than the term handed to
//     the child), and once it has released nothing is left.
//
// A try counts only if it ran as planned: the store still had the child's
// entry right before the child was continued (else the store ended the
// session first: "ended") and the child's deadline, as it read it after
// Lock returned, lay before the moment it was continued (else a keepalive
// answered just before the stop moved it: "retimed"); a try whose release
// or timer overran its resume time is "late". Those are tried again, up to
// three times the count.
//
// The resume times are the one place the suite waits on the clock: they
// are the sweep. Every other wait is on an event (the child's reports, the
// queue's watch).
//
// The count of tries of each case and offset is FreezeTriesEnv's
// (DefaultFreezeTries without it; 20 for the full sweep).
func FrozenWaiter(t *testing.T, st FreezeStore) {
	tries := DefaultFreezeTries
	if v := os.Getenv(FreezeTriesEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive count", FreezeTriesEnv, v)
		}
		tries = n
	}
	f := &freezer{st: st, pred: st.NewSession(t), next: st.NewSession(t)}
	type bucket struct {
		kind   frozenKind
		offset time.Duration
		mu     sync.Mutex
		stats  freezeStats
	}
	var buckets []*bucket
	for _, k := range frozenKinds {
		for _, frac := range freezeOffsets {
			buckets = append(buckets, &bucket{kind: k, offset: time.Duration(frac * float64(st.Margin))})
		}
	}
	// A failure bound for the whole sweep, with room for every retry.
	perTry := st.Holder.TTL + st.Margin + 5*time.Second
	total := len(buckets) * tries
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(3*total/freezeLanes+1)*perTry+Timeout)
	defer cancel()

	start := time.Now()
	jobs := make(chan *bucket, total)
	var pending sync.WaitGroup
	for _, b := range buckets {
		for range tries {
			pending.Add(1)
			jobs <- b
		}
	}
	var lanes sync.WaitGroup
	for range freezeLanes {
		lanes.Go(func() {
			for b := range jobs {
				r := f.try(ctx, b.kind, b.offset)
				b.mu.Lock()
				again := b.stats.add(r) && b.stats.attempts < 3*tries && ctx.Err() == nil
				b.mu.Unlock()
				if r.err != nil {
					t.Errorf("%s, resumed %v after the deadline (planned +%v): %v", b.kind.name, r.offset.Round(time.Millisecond), b.offset, r.err)
				}
				if again {
					jobs <- b // room: this job's slot was just taken
					continue
				}
				pending.Done()
			}
		})
	}
	pending.Wait()
	close(jobs)
	lanes.Wait()

	t.Logf("%s store, child TTL %v, window %v after the deadline; %d tries of each case and offset in %v:",
		st.Holder.Backend, st.Holder.TTL, st.Margin, tries, time.Since(start).Round(time.Second))
	var samples [2]string // an error of each way, as freezeStats.sample
	t.Logf("%-16s %8s %6s %6s %6s %6s %7s %-9s %s", "case", "planned", "passed", "failed", "late", "ended", "retimed", "resumed", "by the check")
	for _, b := range buckets {
		s := b.stats
		t.Logf("%-16s %8v %6d %6d %6d %6d %7d %-9s %d", b.kind.name, "+"+b.offset.Round(time.Millisecond).String(), s.passed, s.failed, s.late, s.ended, s.retimed, s.offsets(), s.byCheck)
		for i, e := range s.sample {
			samples[i] = cmp.Or(samples[i], e)
		}
		if s.passed+s.failed < tries {
			t.Errorf("%s, planned +%v: only %d of %d tries ran as planned (%d late, %d ended by the store first, %d retimed) in %d attempts",
				b.kind.name, b.offset, s.passed+s.failed, tries, s.late, s.ended, s.retimed, s.attempts)
		}
	}
	for i, e := range samples {
		if e != "" {
			t.Logf("the child's error, %s, for example: %s", []string{"by the check", "the session ended first"}[i], e)
		}
	}
}

// freezeStats counts one case and offset's tries.
type freezeStats struct {
	attempts, passed, failed, late, ended, retimed int
	min, max                                       time.Duration // of the offsets of the tries that ran as planned
	// byCheck counts the passed tries failed by the acquisition's own
	// deadline check (its error says the deadline had passed "before
	// the acquisition could return"), rather than by the session ending
	// first.
	byCheck int
	// sample is one error of each way the child's Lock failed: [0] by
	// the check, [1] otherwise.
	sample [2]string
}

// add counts r and reports whether it did not run as planned.
func (s *freezeStats) add(r tryResult) (invalid bool) {
	s.attempts++
	switch r.outcome {
	case tryLate:
		s.late++
	case tryEnded:
		s.ended++
	case tryRetimed:
		s.retimed++
	default:
		if r.err != nil {
			s.failed++
		} else {
			s.passed++
			i := 1
			if strings.Contains(r.childErr, "before the acquisition could return") {
				s.byCheck++
				i = 0
			}
			s.sample[i] = cmp.Or(s.sample[i], r.childErr)
		}
		if s.passed+s.failed == 1 || r.offset < s.min {
			s.min = r.offset
		}
		s.max = max(s.max, r.offset)
		return false
	}
	return true
}

func (s freezeStats) offsets() string {
	if s.passed+s.failed == 0 {
		return "-"
	}
	return fmt.Sprintf("+%d..%dms", s.min.Milliseconds(), s.max.Milliseconds())
}

type tryOutcome int

const (
	tryPlanned tryOutcome = iota // ran as planned: judged
	tryLate                      // the release or the timer overran the resume time
	tryEnded                     // the store had ended the child's session before the resume
	tryRetimed                   // the child's deadline lay after the resume
)

// tryResult is how one try went: err is a failure.
type tryResult struct {
	outcome tryOutcome
	offset  time.Duration // the resume, after the child's deadline as it reported it last
	// childErr is the error the child's Lock (Campaign) returned.
	childErr string
	err      error
}

// freezer runs FrozenWaiter's tries.
type freezer struct {
	st         FreezeStore
	pred, next Session // the child's predecessor's, and the waiter's behind it
	n          atomic.Int64
}

// taken is an acquisition by one of the test's own contenders.
type taken struct {
	token   distlock.Token
	lease   *distlock.Lease     // a Mutex's
	leader  distlock.Leadership // an Election's
	release func(context.Context) error
	err     error
}

// take acquires lock or election name on s (campaigning with value).
func (k frozenKind) take(ctx context.Context, s Session, name, value string) taken {
	if k.election {
		e, err := s.Election(name)
		if err != nil {
			return taken{err: err}
		}
		l, err := e.Campaign(ctx, value)
		if err != nil {
			return taken{err: err}
		}
		return taken{token: l.Token(), leader: l, release: l.Resign}
	}
	m, err := s.Mutex(name)
	if err != nil {
		return taken{err: err}
	}
	l, err := m.Lock(ctx)
	if err != nil {
		return taken{err: err}
	}
	return taken{token: l.Token(), lease: l, release: l.Unlock}
}

// try runs one try of kind k, continuing the child offset after its
// deadline.
func (f *freezer) try(ctx context.Context, k frozenKind, offset time.Duration) (r tryResult) {
	ctx, cancel := context.WithTimeout(ctx, 2*Timeout)
	defer cancel()
	name := fmt.Sprintf("frozen-%s-%d", strings.ToLower(k.name), f.n.Add(1))
	fail := func(format string, args ...any) tryResult {
		r.err = fmt.Errorf("%s: "+format, append([]any{name}, args...)...)
		return r
	}
	pred := k.take(ctx, f.pred, name, "pred")
	if pred.err != nil {
		return fail("the predecessor: %v", pred.err)
	}
	released := false
	defer func() {
		if !released {
			pred.release(context.Background())
		}
	}()

	spec := f.st.Holder
	spec.Lock, spec.Election, spec.Wait = name, k.election, true
	sctx, cancelStart := context.WithTimeout(ctx, Timeout)
	child, err := integration.StartHolder(sctx, spec)
	cancelStart()
	if err != nil {
		return fail("the child: %v", err)
	}
	defer child.Close()
	pid := strconv.Itoa(child.PID())

	nctx, stopNext := context.WithCancel(ctx)
	defer stopNext()
	nextc := make(chan taken, 1)
	go func() { nextc <- k.take(nctx, f.next, name, "next") }()
	var (
		next    taken
		gotNext bool
	)
	defer func() {
		stopNext()
		if !gotNext {
			next = <-nextc
		}
		if next.err == nil && next.release != nil {
			next.release(context.Background())
		}
	}()
	// Behind the child: it enqueued after the child's entry was listed.
	if _, err := awaitQueue(ctx, f.st.Queue, name, func(q []distlock.QueueEntry) bool { return len(q) >= 3 }); err != nil {
		return fail("waiting for the waiter behind the child to enqueue: %v", err)
	}
	select {
	case <-child.Returned():
		res, _ := child.Result(ctx)
		return fail("the child's %s returned while its predecessor held: %+v", k.verb(), res)
	default:
	}

	if err := child.Pause(); err != nil {
		return fail("%v", err)
	}
	deadline := child.Deadline()
	resumeAt := deadline.Add(offset)
	var handed distlock.LeaderInfo
	switch {
	case k.handOff:
		handed, err = pred.leader.HandOff(ctx, pid)
		if err == nil && handed.Value != pid {
			err = fmt.Errorf("handed to %+v, want the child's value %s", handed, pid)
		}
	default:
		err = pred.release(ctx)
	}
	released = true
	if err != nil {
		return fail("the predecessor's release, the child stopped: %v", err)
	}
	if time.Now().After(resumeAt) {
		r.outcome = tryLate
		return r
	}
	time.Sleep(time.Until(resumeAt)) // the sweep: see FrozenWaiter
	if time.Since(resumeAt) > f.st.Margin/10 {
		r.outcome = tryLate
		return r
	}
	q, err := f.st.Queue.Inspect(ctx, name)
	if err != nil {
		return fail("inspect before the resume: %v", err)
	}
	if !slices.ContainsFunc(q, func(e distlock.QueueEntry) bool { return e.Key == child.Entry() }) {
		r.outcome = tryEnded
		return r
	}
	resumed := time.Now()
	if err := child.Resume(); err != nil {
		return fail("%v", err)
	}
	res, err := child.Result(ctx)
	if err != nil {
		return fail("%v", err)
	}
	r.offset, r.childErr = resumed.Sub(res.Deadline), res.Err
	if r.offset < 0 {
		r.outcome = tryRetimed
		return r
	}
	switch {
	case res.Acquired:
		return fail("the child's %s returned an acquisition (token %v) although it was continued %v after its session's client-side deadline %s (it returned %v after it)",
			k.verb(), res.Token, r.offset.Round(time.Millisecond), res.Deadline.Format(time.RFC3339Nano), res.At.Sub(res.Deadline).Round(time.Millisecond))
	case !res.Matches(distlock.ErrSessionExpired):
		return fail("the child's %s failed with %q (matching %v), want an error matching ErrSessionExpired", k.verb(), res.Err, res.Is)
	}

	// Nothing of the child's is left once its session has ended.
	select {
	case <-child.SessionEnded():
	case <-ctx.Done():
		return fail("the child's session has not ended: %v", ctx.Err())
	}
	mine := func(e distlock.QueueEntry) bool { return e.Key == child.Entry() || e.Owner == child.Owner() }
	if _, err := awaitQueue(ctx, f.st.Queue, name, func(q []distlock.QueueEntry) bool { return !slices.ContainsFunc(q, mine) }); err != nil {
		q, _ := f.st.Queue.Inspect(context.Background(), name)
		return fail("the child's entry is left after its session ended (%s): %v; queue %+v", child.SessionErr(), err, q)
	}

	// The waiter behind it acquires, then leaves nothing either.
	select {
	case next = <-nextc:
		gotNext = true
	case <-ctx.Done():
		q, _ := f.st.Queue.Inspect(context.Background(), name)
		return fail("the waiter behind the child did not acquire: %v; queue %+v", ctx.Err(), q)
	}
	if next.err != nil {
		return fail("the waiter behind the child: %v", next.err)
	}
	if !next.token.Newer(pred.token) || !handed.Token.IsZero() && !next.token.Newer(handed.Token) {
		return fail("the waiter behind the child acquired with token %v, not newer than the predecessor's %v and the child's handed term %v", next.token, pred.token, handed.Token)
	}
	err = next.release(ctx)
	next.release = nil
	if err != nil {
		return fail("the waiter behind the child, release: %v", err)
	}
	if _, err := awaitQueue(ctx, f.st.Queue, name, func(q []distlock.QueueEntry) bool { return len(q) == 0 }); err != nil {
		q, _ := f.st.Queue.Inspect(context.Background(), name)
		return fail("the queue is not empty at the end: %v; queue %+v", err, q)
	}
	return r
}

func (k frozenKind) verb() string {
	if k.election {
		return "Campaign"
	}
	return "Lock"
}

// awaitQueue follows lock name's queue until ok says yes, and returns it
// then.
func awaitQueue(ctx context.Context, qr QueueReader, name string, ok func([]distlock.QueueEntry) bool) ([]distlock.QueueEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	var got []distlock.QueueEntry
	found := false
	err := qr.WatchQueue(ctx, name, func(q []distlock.QueueEntry) error {
		if !found && ok(q) {
			got, found = q, true
			cancel()
		}
		return nil
	})
	if found {
		return got, nil
	}
	if err == nil {
		err = ctx.Err()
	}
	return nil, err
}
