package distlock

import "context"

// WaitTurn is the waiting loop both backends share: it blocks until q says
// its owner holds the lock, waiting on one entry at a time.
//
// waitGone must block until entry p is gone (it may meanwhile follow older
// entries and update q, see Queue.After); survivors must refresh q's
// entries older than below from the store (see Queue.Observed), and is
// called when p went while older entries were still in the snapshot: p
// died waiting, or released before the backend learnt that nothing older
// was left.
//
// alive is the owner's own entry: when it ends (entry deleted, session
// over) the wait fails with its cause, which also wins over "acquired" —
// a backend's watch on its own entry may run behind the one on p. (A
// foreign delete of the owner's entry racing the handoff can therefore
// still be reported just after Lock returns, through the Lease's Done.)
func WaitTurn(ctx, alive context.Context, q *Queue,
	waitGone func(ctx context.Context, p Entry) error,
	survivors func(ctx context.Context, below int64)) error {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(alive, func() { cancel(context.Cause(alive)) })
	defer stop()
	for {
		p, ok := q.Next()
		if !ok {
			break
		}
		if err := waitGone(wctx, p); err != nil {
			if alive.Err() != nil {
				return context.Cause(alive)
			}
			return err
		}
		q.Gone(p.Key)
		if _, more := q.Next(); more {
			survivors(wctx, p.Seq)
		}
	}
	if alive.Err() != nil {
		return context.Cause(alive)
	}
	return nil
}
