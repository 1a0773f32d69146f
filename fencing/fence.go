package fencing

import (
	"context"
	"errors"
	"fmt"

	"github.com/distlock/distlock"
)

var (
	// ErrStale reports a token older than one the fence already admitted.
	// The error is a *StaleError.
	ErrStale = errors.New("stale fencing token")
	// ErrForeignToken reports a token of another lock than the one the
	// fence guards.
	ErrForeignToken = errors.New("fencing token of another lock")
)

// StaleError is the refusal of a token older than one admitted before.
type StaleError struct {
	// Resource names what the fence guards, for messages.
	Resource string
	// Token is the refused token.
	Token distlock.Token
	// Newest is the newer token admitted before. Its Seq may be 0 when a
	// backend could not read it back.
	Newest distlock.Token
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("fencing: %s: token %v refused: %v was admitted already", e.Resource, e.Token, e.Newest)
}

// Unwrap makes errors.Is(err, ErrStale) hold.
func (e *StaleError) Unwrap() error { return ErrStale }

// Fence admits the tokens of one lock for one resource.
type Fence interface {
	// Admit records t as the newest token admitted if no newer token of
	// the same lock was admitted before; otherwise it returns a
	// *StaleError. On its own it is atomic only with other Admits: the
	// backends offer a form that makes the resource's write part of the
	// same atomic step, which is what a protected write must use.
	Admit(ctx context.Context, t distlock.Token) error
}

// Doer is a Fence that can run the protected write itself, atomically with
// the check: write runs only if t is admitted, and no other Do or Admit of
// the fence runs meanwhile.
type Doer interface {
	Fence
	Do(ctx context.Context, t distlock.Token, write func(ctx context.Context) error) error
}

// Check returns nil if t is a valid token of lock, and otherwise an error
// wrapping distlock.ErrInvalidToken or ErrForeignToken. Backends call it
// before touching their store.
func Check(resource, lock string, t distlock.Token) error {
	if err := t.Validate(); err != nil {
		return fmt.Errorf("fencing: %s: %w", resource, err)
	}
	if t.Name != lock {
		return fmt.Errorf("fencing: %s: %w: token %v, the resource is guarded by lock %q", resource, ErrForeignToken, t, lock)
	}
	return nil
}

// Compare applies the fencing rule to a token t and the newest token seq
// admitted so far (0 if none): it returns nil if t may be admitted, and a
// *StaleError otherwise.
func Compare(resource string, t distlock.Token, newest int64) error {
	if t.Seq < newest {
		return &StaleError{Resource: resource, Token: t, Newest: distlock.Token{Name: t.Name, Seq: newest}}
	}
	return nil
}
