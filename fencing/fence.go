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
	// ErrFork reports a token with the same sequence number as one the
	// fence admitted, but another owner: two acquisitions that a rebuilt
	// or restored cluster issued with one number. The fence cannot tell
	// which is current, and refuses the one that comes second. The error
	// is a *ForkError. It is distlock.ErrTokenFork, so errors.Is matches
	// either name.
	ErrFork = distlock.ErrTokenFork
	// ErrInvalidArgument reports a fence made or called with an argument
	// it cannot use: an empty etcd key, a znode path that is not absolute,
	// a SQL table or resource name out of sqlfence's rules, an unknown
	// placeholder form, a nil fence, or fences and operations that cannot
	// go into one atomic write (different clients, one key twice, an
	// operation on a fence's own key). It is the caller's mistake, found
	// before the store is asked. A lock name out of the rules wraps
	// distlock.ErrInvalidName instead, and a nil client
	// distlock.ErrNilClient; tokens and fences that do not pair up,
	// ErrUnmatched.
	ErrInvalidArgument = errors.New("invalid fence argument")
)

// ForkError is the refusal of a token whose sequence number equals that
// of the token admitted before, with another owner.
type ForkError struct {
	// Resource names what the fence guards, for messages.
	Resource string
	// Token is the refused token.
	Token distlock.Token
	// Admitted is the token admitted before, with the same Seq. Its Owner
	// is 0 when the fence's store holds a sequence number written before
	// tokens named their owner (see the package documentation).
	Admitted distlock.Token
}

// Error names the resource, the refused token and the one admitted with
// the same sequence number.
func (e *ForkError) Error() string {
	return fmt.Sprintf("fencing: %s: token %v refused: %v was admitted already, with the same sequence number and another owner; two acquisitions carry the number (cluster rebuilt or restored from a backup without moving its revisions or zxids on?)",
		e.Resource, e.Token, admittedText(e.Admitted))
}

// Unwrap makes errors.Is(err, ErrFork) hold.
func (e *ForkError) Unwrap() error { return ErrFork }

// admittedText writes a stored token, also one without owner, which
// Token.String would write as "name@seq.0".
func admittedText(t distlock.Token) string {
	if t.Owner == 0 {
		return fmt.Sprintf("%s@%d (owner not recorded)", t.Name, t.Seq)
	}
	return t.String()
}

// StaleError is the refusal of a token older than one admitted before.
type StaleError struct {
	// Resource names what the fence guards, for messages.
	Resource string
	// Token is the refused token.
	Token distlock.Token
	// Newest is the newer token admitted before. Its Owner is 0 when the
	// fence's store holds a sequence number written before tokens named
	// their owner.
	Newest distlock.Token
}

// Error names the resource, the refused token and the newer one admitted.
func (e *StaleError) Error() string {
	return fmt.Sprintf("fencing: %s: token %v refused: %s was admitted already", e.Resource, e.Token, admittedText(e.Newest))
}

// Unwrap makes errors.Is(err, ErrStale) hold.
func (e *StaleError) Unwrap() error { return ErrStale }

// Fence admits the tokens of one lock for one resource.
type Fence interface {
	// Admit records t as the newest token admitted if no newer token of
	// the same lock was admitted before, nor another acquisition with the
	// same sequence number; otherwise it returns a *StaleError or a
	// *ForkError. On its own it is atomic only with other Admits: the
	// backends offer a form that makes the resource's write part of the
	// same atomic step, which is what a protected write must use.
	Admit(ctx context.Context, t distlock.Token) error
}

// Doer is a Fence that can run the protected write itself, atomically with
// the check: write runs only if t is admitted, and no other Do or Admit of
// the fence runs meanwhile.
type Doer interface {
	Fence
	// Do admits t as Admit does and then runs write, with no other Do or
	// Admit of the fence running meanwhile; when t is refused it returns
	// Admit's error without running write, and otherwise write's.
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

// Compare applies the fencing rule to a token t and the newest token
// admitted so far (the zero Token if none): it returns nil if t may be
// admitted — t is newer, or it is the same acquisition again (equal Seq
// and Owner: a retry) — a *StaleError if t is older, and a *ForkError if
// t has the same Seq with another owner. A newest token with Owner 0 (a
// sequence number stored before tokens named their owner) is taken for
// another acquisition than any token of equal Seq: refusing is the safe
// side, and the holder moves on by acquiring again.
func Compare(resource string, t, newest distlock.Token) error {
	switch {
	case newest.Seq == 0 || t.Seq > newest.Seq:
		return nil
	case t.Seq < newest.Seq:
		return &StaleError{Resource: resource, Token: t, Newest: newest}
	case t.Owner != newest.Owner || newest.Owner == 0:
		return &ForkError{Resource: resource, Token: t, Admitted: newest}
	}
	return nil
}

// Reason classifies a fence's refusal for logs and metrics: "stale",
// "fork", "foreign" (a token of another lock) or "malformed" (an invalid
// token, or a token text that does not parse); "" for nil and for errors
// that are not refusals (the store could not be reached, ...).
func Reason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrStale):
		return "stale"
	case errors.Is(err, ErrFork):
		return "fork"
	case errors.Is(err, ErrForeignToken):
		return "foreign"
	case errors.Is(err, distlock.ErrInvalidToken), errors.Is(err, ErrNoToken):
		return "malformed"
	}
	return ""
}
