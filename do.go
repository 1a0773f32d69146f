package distlock

import (
	"context"
	"errors"
	"time"
)

// unlockTimeout bounds the release Do performs after fn returns, when the
// caller's context may already be done.
const unlockTimeout = 10 * time.Second

// Do acquires l, runs fn under it and always releases it.
//
// fn's context is cancelled when ctx is, and also when the lock is lost;
// context.Cause then tells why. fn receives the acquisition's fencing token,
// to pass along with every write it makes to the protected resource. A
// multi-lock (the stores' MultiMutex) has one token per name, and Do
// hands fn only the first: use DoLease, whose fn gets the Lease and so
// every token (Lease.Tokens), to fence writes under the other names too.
//
// Do returns the error of Lock, or fn's error joined with any error of the
// release. If the lock was lost while fn ran, Do returns an error wrapping
// ErrLost even when fn returned nil: fn's work may have overlapped with a
// successor's, and only a fenced resource can have kept that safe.
func Do(ctx context.Context, l Locker, fn func(ctx context.Context, t Token) error) error {
	return DoLease(ctx, l, func(ctx context.Context, lease *Lease) error {
		return fn(ctx, lease.Token())
	})
}

// DoLease is Do for an fn that needs the held Lease itself: a
// multi-lock's tokens, one per name (Lease.Tokens, which fencing.DoAll
// and the store fences' WriteAll and AdmitAll take), or its Deadline,
// not to start a step that cannot finish in time. fn must not Unlock the
// Lease: DoLease releases it when fn returns (an Unlock of fn's own
// makes that release report ErrReleased). Errors and the context fn runs
// with are Do's.
func DoLease(ctx context.Context, l Locker, fn func(ctx context.Context, lease *Lease) error) (err error) {
	lease, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	// Deferred so that a panic in fn, recovered by the caller, does not
	// leave the lock held until the session ends.
	defer func() {
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
		defer ucancel()
		// Unlock reports a loss that happened before it; fn's own error
		// comes first since it is what the caller asked for.
		err = errors.Join(err, lease.Unlock(uctx))
	}()
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(lease.Context(), func() { cancel(lease.Err()) })
	defer stop()
	return fn(runCtx, lease)
}
