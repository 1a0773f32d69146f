package qlock

import (
	"context"
	"errors"
	"testing"

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

func TestHoldWhile(t *testing.T) {
	tok := distlock.Token{Name: "a", Seq: 7, Owner: 1}
	release := func(context.Context) error { return nil }

	alive, kill := context.WithCancelCause(context.Background())
	var told error
	l, _ := holdWhile("", tok, alive, release, nil, nil, func(cause error) { told = cause })
	kill(distlock.ErrSessionExpired)
	<-l.Done()
	if !errors.Is(l.Err(), distlock.ErrLost) || !errors.Is(l.Err(), distlock.ErrSessionExpired) || !errors.Is(told, distlock.ErrSessionExpired) {
		t.Fatalf("Err %v, told %v: want the entry's end as a loss", l.Err(), told)
	}
	var le *distlock.LockError
	if !errors.As(l.Err(), &le) || le.Op != distlock.OpHold || le.Name != "a" {
		t.Fatalf("Err %v: want a LockError for op hold on lock a", l.Err())
	}

	// Ended by the engine's own release: not a loss.
	alive, kill = context.WithCancelCause(context.Background())
	l, _ = holdWhile("", tok, alive, func(context.Context) error { kill(distlock.ErrReleased); return nil }, nil, nil, nil)
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(l.Err(), distlock.ErrReleased) || errors.Is(l.Err(), distlock.ErrLost) {
		t.Fatalf("Err after Unlock: %v", l.Err())
	}
}
