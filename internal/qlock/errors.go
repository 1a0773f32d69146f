package qlock

import (
	"errors"
	"fmt"

	"github.com/distlock/distlock"
)

// The engine's errors about a lock are *distlock.LockError values that
// name the session's backend, returned as they are: distlock.LockError
// says which layer adds what.

// fail returns the error of op on lock name of e's session, with cause
// err.
func (e *Engine) fail(name string, op distlock.Op, err error) error {
	return &distlock.LockError{Backend: e.st.backend.Name, Name: name, Op: op, Err: err}
}

// inner returns err, a Lease's error (its Err, or Unlock's: a
// *distlock.LockError, or a join of them), as the cause of another
// LockError of the same lock: each LockError in it reads "op: cause",
// since the one around it names the library, the backend and the lock.
// errors.Is and errors.As see through it as through err.
func inner(err error) error {
	switch e := err.(type) {
	case *distlock.LockError:
		return innerError{e}
	case interface{ Unwrap() []error }:
		errs := e.Unwrap()
		out := make([]error, len(errs))
		for i, x := range errs {
			out[i] = inner(x)
		}
		return errors.Join(out...)
	}
	return err
}

// innerError is a LockError as the cause of another of the same lock.
type innerError struct{ e *distlock.LockError }

func (e innerError) Error() string { return fmt.Sprintf("%s: %v", e.e.Op, e.e.Err) }
func (e innerError) Unwrap() error { return e.e }
