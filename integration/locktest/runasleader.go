package locktest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/distlock/distlock"
)

// runAsLeaderCases: RunAsLeader's graceful stop, preemption and fn's errors.
var runAsLeaderCases = []struct {
	name string
	run  func(t *testing.T, b Backend)
}{
	{"RunAsLeaderStopHandsOver", runAsLeaderStopHandsOver},
	{"RunAsLeaderPreempted", runAsLeaderPreempted},
	{"RunAsLeaderReturnsFnError", runAsLeaderReturnsFnError},
}

// worker is one RunAsLeader worker: its terms' tokens, and what
// RunAsLeader returned.
type worker struct {
	terms    chan distlock.Token
	causes   chan error // why each term's context ended
	returned chan error
	done     chan struct{} // closed once RunAsLeader returned
	cancel   context.CancelFunc
}

// startWorker runs RunAsLeader on e until the test ends or stop is
// called; fn reports each term and waits for its context.
func startWorker(t *testing.T, e distlock.Elector, value string, opts ...distlock.CampaignOption) *worker {
	ctx, cancel := context.WithCancel(Ctx(t))
	w := &worker{terms: make(chan distlock.Token, 10), causes: make(chan error, 10), returned: make(chan error, 1), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(w.done)
		w.returned <- distlock.RunAsLeader(ctx, e, value, func(ctx context.Context, tok distlock.Token) error {
			w.terms <- tok
			<-ctx.Done()
			w.causes <- context.Cause(ctx)
			return nil
		}, opts...)
	}()
	t.Cleanup(func() {
		cancel()
		<-w.done
	})
	return w
}

// runAsLeaderStopHandsOver: cancelling the leading worker's context
// hands leadership to the waiting worker in the write that ends the
// term: observers never see the election without a leader, and the
// successor's token is newer.
func runAsLeaderStopHandsOver(t *testing.T, b Backend) {
	const name = "graceful"
	o := Observe(t, election(t, b.Session(t), name))
	o.Await(t, distlock.LeaderInfo{})
	a := startWorker(t, election(t, b.Session(t), name), "a")
	ta := Recv(t, a.terms, "a's term")
	wb := startWorker(t, election(t, b.Session(t), name), "b")
	b.WaitEntries(t, name, 2)

	a.cancel()
	if err := Recv(t, a.returned, "a's RunAsLeader after its stop"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a's RunAsLeader returned %v, want context.Canceled", err)
	}
	tb := Recv(t, wb.terms, "b's term after a's stop")
	if !tb.Newer(ta) {
		t.Fatalf("b's token %v is not newer than a's %v", tb, ta)
	}
	seen := o.Await(t, distlock.LeaderInfo{Value: "b", Token: tb})
	want := []distlock.LeaderInfo{{}, {Value: "a", Token: ta}, {Value: "b", Token: tb}}
	if !slices.Equal(seen, want) {
		t.Fatalf("Observe saw %v, want %v: a graceful stop leaves no moment without a leader", seen, want)
	}
}

// runAsLeaderPreempted: a worker of a higher priority asks the leading
// worker (on a revocable session) to step down: the leader's fn sees its
// context end with a *RevokedError, and RunAsLeader hands over to the
// higher priority at once, before any other waiting candidate.
func runAsLeaderPreempted(t *testing.T, b Backend) {
	const name = "preempt"
	low := startWorker(t, election(t, revocable(t, b), name), "low")
	tl := Recv(t, low.terms, "the low-priority worker's term")
	waiting := CampaignAsync(Ctx(t), election(t, b.Session(t), name), "waiting")
	b.WaitEntries(t, name, 2)

	high := startWorker(t, election(t, b.Session(t), name), "high", distlock.WithPriority(5))
	cause := Recv(t, low.causes, "the low-priority term's end")
	var rerr *distlock.RevokedError
	if !errors.As(cause, &rerr) || rerr.Revocation.Token != tl.String() {
		t.Fatalf("the preempted term ended with %v, want a *RevokedError for %v", cause, tl)
	}
	th := Recv(t, high.terms, "the high-priority worker's term")
	if !th.Newer(tl) {
		t.Fatalf("the high-priority token %v is not newer than %v", th, tl)
	}
	li, err := election(t, b.Session(t), name).Leader(Ctx(t))
	if err != nil || li.Value != "high" || li.Priority != 5 || li.Token != th {
		t.Fatalf("Leader: %+v, %v; want high, priority 5, token %v", li, err, th)
	}
	select {
	case c := <-waiting:
		t.Fatalf("the waiting candidate's Campaign returned (%v, %v) before the higher priority's term ended", c.Leadership, c.Err)
	default:
	}
}
