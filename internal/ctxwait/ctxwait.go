// Package ctxwait holds the one waiting helper both lock backends need for
// their retry loops.
package ctxwait

import (
	"context"
	"time"
)

// Sleep waits d or until ctx ends, whichever is first; then it returns
// ctx's cause.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
