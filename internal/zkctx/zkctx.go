// Package zkctx gives go-zookeeper's blocking requests a context.
package zkctx

import "context"

// Call runs f, a blocking go-zookeeper request, and returns its result, or
// ctx's cause as soon as ctx ends; the request then completes unobserved
// (go-zookeeper offers no way to cancel one). A ctx that has already ended
// sends nothing.
func Call[T any](ctx context.Context, f func() (T, error)) (T, error) {
	if ctx.Err() != nil {
		var zero T
		return zero, context.Cause(ctx)
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, context.Cause(ctx)
	}
}
