package locktest

import (
	"context"
	"errors"
	"testing"

	"github.com/distlock/distlock"
)

// runAsLeaderReturnsFnError: a fn that fails on its own while its
// candidate leads ends RunAsLeader with fn's error, after the term is
// handed to the waiting worker; a fn that fails because its term was
// lost (its session ended) does not: that worker campaigns again, and
// returns ctx's cause once ctx ends.
func runAsLeaderReturnsFnError(t *testing.T, b Backend) {
	const name = "fnerr"
	boom := errors.New("boom")
	ctx, cancel := context.WithCancel(Ctx(t))
	defer cancel()

	// fn fails on its own, while leading.
	term := make(chan distlock.Token, 1)
	fail := make(chan struct{})
	returned := make(chan error, 1)
	go func() {
		returned <- distlock.RunAsLeader(ctx, election(t, b.Session(t), name), "failing", func(ctx context.Context, tok distlock.Token) error {
			term <- tok
			<-fail
			return boom
		})
	}()
	ta := Recv(t, term, "the failing worker's term")
	next := startWorker(t, election(t, b.Session(t), name), "next")
	b.WaitEntries(t, name, 2)
	close(fail)
	if err := Recv(t, returned, "RunAsLeader after fn failed"); err != boom {
		t.Fatalf("RunAsLeader returned %v, want fn's error %v", err, boom)
	}
	tn := Recv(t, next.terms, "the next worker's term")
	if !tn.Newer(ta) {
		t.Fatalf("the next worker's token %v is not newer than %v", tn, ta)
	}
	next.cancel()
	if err := Recv(t, next.returned, "the next worker's RunAsLeader"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the next worker's RunAsLeader returned %v, want ctx's cause", err)
	}

	// fn fails because its term was lost: RunAsLeader goes on, and
	// returns ctx's cause, not fn's error, once ctx ends.
	s := b.Session(t)
	causes := make(chan error, 1)
	go func() {
		returned <- distlock.RunAsLeader(ctx, election(t, s, name), "lost", func(ctx context.Context, tok distlock.Token) error {
			term <- tok
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return boom
		})
	}()
	Recv(t, term, "the losing worker's term")
	s.End(t)
	if cause := Recv(t, causes, "the lost term's end"); !errors.Is(cause, distlock.ErrLost) {
		t.Fatalf("the lost term ended with %v, want ErrLost", cause)
	}
	cancel()
	if err := Recv(t, returned, "RunAsLeader after a lost term and ctx's end"); !errors.Is(err, context.Canceled) || errors.Is(err, boom) {
		t.Fatalf("RunAsLeader returned %v, want ctx's cause: fn's error after a lost term is the loss's", err)
	}
}
