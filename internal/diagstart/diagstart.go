// Package diagstart runs a session's first request with package
// diagnose's probes beside it, for etcdlock.NewSession and
// zklock.NewSession: the clients retry a dead endpoint forever, silently,
// and NewSession should rather say why.
package diagstart

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/diagnose"
)

// Delay is how long the first request goes alone before the endpoints
// are probed: a reachable cluster answers well within it, and never sees
// the probes.
const Delay = time.Second

// Run returns start(ctx). If start has not returned within Delay (half
// the time left to ctx's deadline, if that is sooner), probe
// runs beside it; when probe finds every endpoint unusable in a way that
// waiting will not mend (diagnose.Error.Final) and canFail allows it,
// start is canceled and Run returns the diagnosis as the error (a start
// that succeeded meanwhile wins).
// Otherwise start goes on until ctx ends, and its error then carries the
// diagnosis too.
func Run[T any](ctx context.Context, start func(context.Context) (T, error), probe func(context.Context) error, canFail bool) (T, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The probes end with Run: a start that succeeds while they run
	// leaves nothing behind.
	pctx, cancelProbe := context.WithCancel(ctx)
	defer cancelProbe()
	type started struct {
		v   T
		err error
	}
	done := make(chan started, 1)
	go func() {
		v, err := start(sctx)
		done <- started{v, err}
	}()
	// A deadline sooner than two Delays gets the probes at half of it, for
	// its error to say why.
	wait := Delay
	if d, ok := ctx.Deadline(); ok && time.Until(d)/2 < wait {
		wait = max(time.Until(d)/2, 0)
	}
	delay := time.NewTimer(wait)
	defer delay.Stop()
	var (
		diag   chan error // the probe's result, once it runs
		result error      // the probe's result, once in
		have   bool
	)
	// The probes end by ctx's deadline (diagnose.DefaultTimeout without
	// one), and at once when ctx is canceled.
	for {
		select {
		case s := <-done:
			if s.err == nil {
				return s.v, nil
			}
			if ctx.Err() != nil && diag != nil && !have {
				// Give the probes their last verdicts: they end with ctx.
				select {
				case result = <-diag:
					have = true
				case <-time.After(200 * time.Millisecond):
				}
			}
			var derr *diagnose.Error
			if have && errors.As(result, &derr) {
				return s.v, &Error{Err: s.err, Diagnosis: derr}
			}
			return s.v, s.err
		case <-delay.C:
			diag = make(chan error, 1)
			go func() { diag <- probe(pctx) }()
		case result = <-diag:
			have, diag = true, nil
			var derr *diagnose.Error
			if !canFail || !errors.As(result, &derr) || !derr.Final() {
				continue
			}
			cancel()
			s := <-done
			if s.err == nil {
				return s.v, nil // it made it after all
			}
			var zero T
			return zero, derr
		}
	}
}

// Error is a failed start's error with the diagnosis of the endpoints
// beside it: it matches (errors.Is) both.
type Error struct {
	Err       error
	Diagnosis *diagnose.Error
}

func (e *Error) Error() string { return fmt.Sprintf("%v (%v)", e.Err, e.Diagnosis) }

// Unwrap returns the start's error and the diagnosis.
func (e *Error) Unwrap() []error { return []error{e.Err, e.Diagnosis} }
