package etcdq

import (
	"context"
	"errors"
	"time"

	"github.com/distlock/distlock/internal/qlock"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxAttempts bounds the attempts of one hedged call (and sizes the
// buffer their results go to, so that none blocks after the call returns).
const maxAttempts = 16

// hedged calls op until an attempt succeeds, fails for good, or ctx ends.
// It is for requests that may be sent more than once (reads, keepalives,
// a delete conditioned on the key's create revision) on a client that
// spreads requests over the members.
//
// A member that is frozen or cut off keeps its connections open and
// answers nothing, so an attempt that lands on it hangs. Rather than
// cancel it after a timeout (and lose its answer if it was only slow),
// another attempt goes out beside it every delay; the client's
// round-robin balancer sends each new request to the next member, so
// within two or three delays one reaches a healthy member. The first
// attempt to succeed wins; the others are cancelled when hedged returns.
//
// An attempt that fails at once with a retryable error (see retryable) is
// sent again after qlock.RetryDelay, or at the next delay if sooner; any other
// error ends the call. op gets a context cancelled when hedged returns.
func hedged[T any](ctx context.Context, delay time.Duration, op func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the attempts still pending
	type result struct {
		v   T
		err error
	}
	results := make(chan result, maxAttempts)
	sent, pending := 0, 0
	send := func() {
		sent++
		pending++
		go func() {
			v, err := op(ctx)
			results <- result{v, err}
		}()
	}
	next := time.NewTimer(delay)
	defer next.Stop()
	send()
	var last error
	for {
		select {
		case r := <-results:
			pending--
			if r.err == nil || ctx.Err() != nil || !retryable(r.err) {
				return r.v, r.err
			}
			last = r.err
			if pending == 0 {
				next.Reset(min(qlock.RetryDelay, delay))
			}
		case <-next.C:
			if sent < maxAttempts {
				send()
			}
			next.Reset(delay)
		case <-ctx.Done():
			var zero T
			if last == nil {
				last = context.Cause(ctx)
			}
			return zero, errors.Join(context.Cause(ctx), last)
		}
	}
}

// retryable reports whether an attempt's error says only that the member
// it went to could not serve it now.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	// The client turns the server's own errors ("etcdserver: request
	// timed out", "leader changed", "no leader") into rpctypes.EtcdError,
	// which carries its gRPC code but no status: a member that could not
	// get the request committed in time says so this way.
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		switch ee.Code() {
		case codes.Unavailable, codes.DeadlineExceeded:
			return true
		}
	}
	return errors.Is(err, context.DeadlineExceeded)
}
