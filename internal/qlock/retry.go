package qlock

import (
	"context"
	"time"

	"github.com/distlock/distlock/internal/ctxwait"
)

const (
	// RetryDelay spaces out retries of a request that failed because the
	// store could not serve it now (a member or server failing, the client
	// between servers), so that one that keeps failing is not hammered.
	RetryDelay = 50 * time.Millisecond

	// AbandonTimeout bounds the cleanup a failed acquisition does before
	// it returns; what has not gone through by then is retried in the
	// background (see Retry).
	AbandonTimeout = time.Second
)

// Retry is a cleanup that must happen eventually: it calls attempt until
// attempt reports done, ctx ends or while (when not nil) says to stop.
// Each call gets a context bounded by timeout; the pauses between calls
// start at RetryDelay and double up to max.
func Retry(ctx context.Context, timeout, max time.Duration, while func() bool, attempt func(ctx context.Context) (done bool)) {
	for delay := RetryDelay; while == nil || while(); delay = min(2*delay, max) {
		actx, cancel := context.WithTimeout(ctx, timeout)
		done := attempt(actx)
		cancel()
		if done || ctxwait.Sleep(ctx, delay) != nil {
			return
		}
	}
}
