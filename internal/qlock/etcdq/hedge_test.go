package etcdq

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestHedged checks the rules of hedged calls on stand-in operations (the
// member-fault tests run them against real members).
func TestHedged(t *testing.T) {
	const delay = 20 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	t.Run("a hung attempt does not hold the call", func(t *testing.T) {
		var n atomic.Int32
		cancelled := make(chan struct{})
		v, err := hedged(ctx, delay, func(ctx context.Context) (int32, error) {
			i := n.Add(1)
			if i == 1 { // the frozen member: answers nothing
				<-ctx.Done()
				close(cancelled)
				return 0, ctx.Err()
			}
			return i, nil
		})
		if err != nil || v != 2 {
			t.Fatalf("got %d, %v; want the second attempt's answer", v, err)
		}
		select {
		case <-cancelled:
		case <-time.After(5 * time.Second):
			t.Fatal("the hung attempt was not cancelled when the call returned")
		}
	})

	t.Run("a slow answer still counts", func(t *testing.T) {
		var n atomic.Int32
		v, err := hedged(ctx, delay, func(ctx context.Context) (int32, error) {
			i := n.Add(1)
			if i == 1 {
				time.Sleep(3 * delay) // slower than a hedge, faster than the rest
				return i, nil
			}
			<-ctx.Done()
			return 0, ctx.Err()
		})
		if err != nil || v != 1 {
			t.Fatalf("got %d, %v; want the first attempt's late answer", v, err)
		}
	})

	t.Run("a retryable failure is retried", func(t *testing.T) {
		var n atomic.Int32
		v, err := hedged(ctx, time.Hour, func(ctx context.Context) (int32, error) {
			if i := n.Add(1); i < 3 {
				return 0, status.Error(codes.Unavailable, "no leader")
			}
			return n.Load(), nil
		})
		if err != nil || v != 3 {
			t.Fatalf("got %d, %v; want success on the third attempt", v, err)
		}
	})

	t.Run("other errors end the call", func(t *testing.T) {
		bad := errors.New("lease not found")
		var n atomic.Int32
		_, err := hedged(ctx, delay, func(ctx context.Context) (int32, error) {
			n.Add(1)
			return 0, bad
		})
		if !errors.Is(err, bad) || n.Load() != 1 {
			t.Fatalf("got %v after %d attempts; want %v after one", err, n.Load(), bad)
		}
	})

	t.Run("the context's end is the error", func(t *testing.T) {
		dctx, dcancel := context.WithTimeout(ctx, 5*delay)
		defer dcancel()
		var n atomic.Int32
		_, err := hedged(dctx, delay, func(ctx context.Context) (int32, error) {
			n.Add(1)
			<-ctx.Done()
			return 0, ctx.Err()
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v; want one matching context.DeadlineExceeded", err)
		}
		if got := n.Load(); got < 2 || got > maxAttempts {
			t.Fatalf("%d attempts; want hedges, at most %d", got, maxAttempts)
		}
	})
}

// TestRetryableServerTimeouts: the server's own timeouts reach the caller
// as rpctypes errors without a gRPC status, and must still be retried on
// another member.
func TestRetryableServerTimeouts(t *testing.T) {
	for _, err := range []error{rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrLeaderChanged, rpctypes.ErrNoLeader} {
		if !retryable(err) {
			t.Errorf("retryable(%v) = false", err)
		}
	}
	if retryable(rpctypes.ErrKeyNotFound) || retryable(rpctypes.ErrPermissionDenied) {
		t.Error("a definite answer was taken for retryable")
	}
}
