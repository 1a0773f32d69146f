package zkq

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
)

// Enqueue creates r's entry node and lists its directory (qlock.Driver).
// ZooKeeper cannot compare the children and create in one operation, so a
// Try request first syncs and lists the directory and loses at once,
// writing nothing, when an entry is there; the engine deletes the node if
// an entry created in between turns out to be ahead.
func (s *Session) Enqueue(ctx context.Context, name string, r qlock.Request) (*qlock.Node, []qlock.Entry, bool, error) {
	es, err := s.EnqueueAll(ctx, []string{name}, r)
	if err != nil {
		return nil, nil, false, err
	}
	return es[0].Node, es[0].Ahead, false, nil
}

// EnqueueAll is Enqueue of one entry in each of names' directories, all
// created by one multi, at one zxid (qlock.Multi). The entries share one
// GUID: a multi cut off by a connection loss made all of them or none.
func (s *Session) EnqueueAll(ctx context.Context, names []string, r qlock.Request) ([]qlock.Enqueued, error) {
	if !s.ours() {
		return nil, s.expired("expired (the connection reports another session)")
	}
	dirs := make([]string, len(names))
	for i, name := range names {
		dirs[i] = s.Dir(name)
	}
	if r.Try {
		// Look before creating: a TryLock that loses to a visible entry
		// costs one read and writes nothing. The Sync first makes the
		// look as fresh as etcd's: a release that completed before
		// TryLock was called is seen, even by a lagging follower.
		if _, err := retry(ctx, func() (string, error) { return s.conn.Sync("/") }); err != nil {
			return nil, s.storeErr(err)
		}
		for _, dir := range dirs {
			if p, found, err := s.first(ctx, dir, r.Kind); err != nil {
				return nil, err
			} else if found {
				return nil, fmt.Errorf("%w (entry %s)", distlock.ErrLocked, p)
			}
		}
	}
	guid := newGUID()
	var paths []string
	if len(dirs) == 1 {
		p, err := s.create(ctx, dirs[0], entryBase(r.Kind, guid, r.Priority, r.Compat, r.RW), guid, r.Value)
		if err != nil {
			return nil, err
		}
		paths = []string{p}
	} else {
		var err error
		if paths, err = s.createAll(ctx, dirs, entryBase(r.Kind, guid, r.Priority, r.Compat, r.RW), guid, r.Value); err != nil {
			return nil, err
		}
	}
	// Each listing and the read of its node's Stat (with the watch that
	// follows it) go out together: all follow the create on the session's
	// ordered channel, so a listing sees every entry created before mine.
	type listing struct {
		children []string
		err      error
	}
	lchs := make([]chan listing, len(dirs))
	for i, dir := range dirs {
		lchs[i] = make(chan listing, 1)
		go func() {
			c, err := retry(ctx, func() ([]string, error) {
				c, _, err := s.conn.Children(dir)
				return c, err
			})
			lchs[i] <- listing{c, err}
		}()
	}
	// The Stats are read together too: one round trip, whatever the
	// number of names. An own that fails removes its node; the others are
	// removed below.
	out := make([]qlock.Enqueued, len(dirs))
	errs := make([]error, len(dirs))
	var wg sync.WaitGroup
	for i, dir := range dirs {
		wg.Go(func() {
			_, _, seq, _ := parseAny(paths[i][len(dir)+1:])
			out[i].Node, errs[i] = s.own(ctx, paths[i], seq, r.Kind)
		})
	}
	wg.Wait()
	var failed error
	for i, err := range errs {
		if err != nil {
			failed = cmp.Or(failed, err)
			paths[i] = ""
		}
	}
	for i, dir := range dirs {
		l := <-lchs[i]
		if l.err != nil && failed == nil {
			failed = s.storeErr(l.err)
		}
		out[i].Ahead = entries(dir, r.Kind, l.children)
		if r.Kind != qlock.Counted { // a semaphore's line has no foreign entries
			s.warnUnknown(names[i], l.children)
		}
	}
	if failed != nil {
		for _, p := range paths {
			if p != "" {
				s.abandon(p)
			}
		}
		return nil, failed
	}
	return out, nil
}

// first returns the oldest entry in dir that an entry of kind would wait
// for, if any.
func (s *Session) first(ctx context.Context, dir string, kind qlock.Kind) (string, bool, error) {
	children, err := listChildren(ctx, s.conn, dir)
	if err != nil {
		return "", false, s.storeErr(err)
	}
	q := qlock.NewQueue(qlock.Entry{Seq: math.MaxInt64, Kind: kind}, entries(dir, kind, children), false)
	if p, ok := q.Next(); ok {
		return p.Key, true, nil
	}
	return "", false, nil
}
