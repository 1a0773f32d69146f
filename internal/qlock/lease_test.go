package qlock

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

func TestLost(t *testing.T) {
	if err := Lost(nil); err != distlock.ErrLost {
		t.Errorf("Lost(nil) = %v, want ErrLost", err)
	}
	if err := Lost(distlock.ErrLost); err != distlock.ErrLost {
		t.Errorf("Lost(ErrLost) = %v, want ErrLost itself", err)
	}
	err := Lost(distlock.ErrSessionExpired)
	if !errors.Is(err, distlock.ErrLost) || !errors.Is(err, distlock.ErrSessionExpired) {
		t.Errorf("Lost(ErrSessionExpired) = %v, want both", err)
	}
	// A reason that already says "lost" is not wrapped in ErrLost twice.
	if again := Lost(err); again != err {
		t.Errorf("Lost(Lost(x)) = %v, want Lost(x) itself", again)
	}
}

func TestLoseWith(t *testing.T) {
	tok := distlock.Token{Name: "a", Seq: 7, Owner: 1}
	e := &Engine{st: NewState(Backend{}, slog.New(slog.DiscardHandler), "", 0, time.Now().Add(time.Minute), Observe{})}
	hold := func(alive context.Context, release func(context.Context) error, ended func(error)) *distlock.Lease {
		l, lose := distlock.NewLease("", tok, release, nil)
		e.loseWith(alive, lose, ended, tok.Name, tok.Seq)
		return l
	}

	alive, kill := context.WithCancelCause(context.Background())
	told := make(chan error, 1)
	l := hold(alive, func(context.Context) error { return nil }, func(cause error) { told <- cause })
	kill(distlock.ErrSessionExpired)
	<-l.Done()
	if cause := <-told; !errors.Is(l.Err(), distlock.ErrLost) || !errors.Is(l.Err(), distlock.ErrSessionExpired) || !errors.Is(cause, distlock.ErrSessionExpired) {
		t.Fatalf("Err %v, told %v: want the entry's end as a loss", l.Err(), cause)
	}
	var le *distlock.LockError
	if !errors.As(l.Err(), &le) || le.Op != distlock.OpHold || le.Name != "a" {
		t.Fatalf("Err %v: want a LockError for op hold on lock a", l.Err())
	}

	// Ended by the engine's own release: not a loss.
	alive, kill = context.WithCancelCause(context.Background())
	l = hold(alive, func(context.Context) error { kill(distlock.ErrReleased); return nil }, func(error) {})
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(l.Err(), distlock.ErrReleased) || errors.Is(l.Err(), distlock.ErrLost) {
		t.Fatalf("Err after Unlock: %v", l.Err())
	}
}
