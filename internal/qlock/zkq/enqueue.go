package zkq

import (
	"context"
	"fmt"
	"math"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
)

// Enqueue creates r's entry node and lists its directory (qlock.Driver).
// ZooKeeper cannot compare the children and create in one operation, so a
// Try request first syncs and lists the directory and loses at once,
// writing nothing, when an entry is there; the engine deletes the node if
// an entry created in between turns out to be ahead.
func (s *Session) Enqueue(ctx context.Context, name string, r qlock.Request) (*qlock.Node, []qlock.Entry, bool, error) {
	if !s.ours() {
		return nil, nil, false, s.expired("expired (the connection reports another session)")
	}
	dir := s.Dir(name)
	if r.Try {
		// Look before creating: a TryLock that loses to a visible entry
		// costs one read and writes nothing. The Sync first makes the
		// look as fresh as etcd's: a release that completed before
		// TryLock was called is seen, even by a lagging follower.
		if _, err := retry(ctx, func() (string, error) { return s.conn.Sync("/") }); err != nil {
			return nil, nil, false, s.storeErr(err)
		}
		if p, found, err := s.first(ctx, dir, r.Kind); err != nil {
			return nil, nil, false, err
		} else if found {
			return nil, nil, false, fmt.Errorf("%w (entry %s)", distlock.ErrLocked, p)
		}
	}
	guid := newGUID()
	path, err := s.create(ctx, dir, entryBase(r.Kind, guid), guid, r.Value)
	if err != nil {
		return nil, nil, false, err
	}
	_, _, seq, _ := parseAny(path[len(dir)+1:])
	// The listing and the read of my node's Stat (with the watch that
	// follows it) go out together: both follow the create on the session's
	// ordered channel, so the listing sees every entry created before mine.
	type listing struct {
		children []string
		err      error
	}
	lch := make(chan listing, 1)
	go func() {
		c, err := retry(ctx, func() ([]string, error) {
			c, _, err := s.conn.Children(dir)
			return c, err
		})
		lch <- listing{c, err}
	}()
	n, err := s.own(ctx, path, seq, r.Kind)
	if err != nil {
		return nil, nil, false, err
	}
	l := <-lch
	if l.err != nil {
		s.abandon(path)
		return nil, nil, false, s.storeErr(l.err)
	}
	return n, entries(dir, r.Kind, l.children), false, nil
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
