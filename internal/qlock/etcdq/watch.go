package etcdq

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/qlock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// waitDeleted blocks until the key created at createRev no longer exists,
// and returns then a revision at which it was gone; or returns ctx's
// cause.
//
// known is a revision at which the key was known to exist. The watch
// starts at the current revision, which etcd serves as soon as the delete
// is committed (a watch that starts in the past is served by a catch-up
// loop that runs every 100 ms); if the revision moved past known before
// the watch started, one read at the watch's start revision tells
// whether the key was deleted in between.
//
// A watch stream can go silent without ending: the member it sits on is
// frozen or cut off, and keeps the connection open. So a watch that has
// heard nothing for a while asks for a progress notification (see
// watchOnce), and one that stays silent is moved: the session switches
// its watches to a new gRPC stream, which the client's balancer opens on
// the next member, and the watch starts again there (with the gap check
// above).
func (s *Session) waitDeleted(ctx context.Context, key string, createRev, known int64) (int64, error) {
	for {
		gen := s.streamGen.Load()
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		opts := []clientv3.OpOption{clientv3.WithCreatedNotify(), clientv3.WithFilterPut()}
		stream := streamName(gen)
		wctx = metadata.AppendToOutgoingContext(wctx, "distlock-watch", stream)
		// Opened in the background: Watch itself waits for the stream,
		// which may sit on a silent member, and watchOnce's silence check
		// must cover that wait too.
		opened := make(chan clientv3.WatchChan, 1)
		go func() { opened <- s.client.Watch(wctx, key, opts...) }()
		gone, seen, silent, err := s.watchOnce(ctx, wctx, opened, key, createRev, known)
		cancel()
		if gone || err != nil {
			return seen, err
		}
		if silent {
			if s.streamGen.CompareAndSwap(gen, gen+1) {
				s.Log().Info("etcdlock: watch stream silent; moving the session's watches to a new stream", "key", key, "stream", stream)
			}
		}
		known = seen
		if err := ctxwait.Sleep(ctx, qlock.RetryDelay); err != nil {
			return 0, err
		}
	}
}

// watchCheck is how long a watch may hear nothing before it asks its
// stream for a progress notification; after three times as long without
// any answer, the stream is taken for silent. With the default TTL a quiet
// watch costs a progress request every five seconds, shared by all the
// watches on its stream (the answer goes to every one of them).
func (s *Session) watchCheck() time.Duration { return s.ttl / 6 }

// askProgress requests a progress notification on the stream that wctx's
// metadata selects, unless one was requested on it within watchCheck.
func (s *Session) askProgress(wctx context.Context, stream string) {
	now := time.Now()
	s.progressMu.Lock()
	if last, ok := s.progressAsked[stream]; ok && now.Sub(last) < s.watchCheck() {
		s.progressMu.Unlock()
		return
	}
	if s.progressAsked == nil {
		s.progressAsked = map[string]time.Time{}
	}
	s.progressAsked[stream] = now
	s.progressMu.Unlock()
	rctx, cancel := context.WithTimeout(wctx, s.watchCheck())
	defer cancel()
	if err := s.client.RequestProgress(rctx); err != nil {
		s.Log().Debug("etcdlock: progress request failed", "stream", stream, "err", err)
	}
}

// watchOnce follows one watch until the key is deleted (gone), the watch
// ends or its stream stays silent (silent; retry from the returned
// revision), or ctx ends (err).
func (s *Session) watchOnce(ctx, wctx context.Context, opened <-chan clientv3.WatchChan, key string, createRev, known int64) (gone bool, seen int64, silent bool, err error) {
	seen = known
	stream := streamOf(wctx)
	check := time.NewTicker(s.watchCheck())
	defer check.Stop()
	heard := time.Now()
	var wch clientv3.WatchChan // nil until opened
	for {
		var resp clientv3.WatchResponse
		select {
		case wch = <-opened:
			opened = nil
			continue
		case r, ok := <-wch:
			if !ok {
				if ctx.Err() != nil {
					return false, seen, false, context.Cause(ctx)
				}
				return false, seen, false, nil
			}
			resp = r
			heard = time.Now()
		case <-check.C:
			quiet := time.Since(heard)
			if quiet >= 3*s.watchCheck() {
				s.Log().Debug("etcdlock: watch silent", "key", key, "for", quiet)
				return false, seen, true, nil
			}
			if quiet >= s.watchCheck() && wch != nil {
				// In the background: the request waits for the stream.
				go s.askProgress(wctx, stream)
			}
			continue
		case <-ctx.Done():
			return false, seen, false, context.Cause(ctx)
		}
		if resp.Created && resp.Header.Revision > seen {
			// Opened at the current revision, later than the last one
			// known: look whether the key went in the gap.
			at := resp.Header.Revision
			exists, err := s.existsAt(ctx, key, createRev, at)
			if err != nil {
				if ctx.Err() != nil {
					return false, seen, false, context.Cause(ctx)
				}
				s.Log().Debug("etcdlock: gap check failed", "key", key, "err", err)
				return false, seen, false, nil
			}
			if !exists {
				return true, at, false, nil
			}
			seen = at
		}
		if err := resp.Err(); err != nil || resp.Canceled {
			s.Log().Debug("etcdlock: watch ended", "key", key, "err", err)
			return false, seen, false, nil
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return true, ev.Kv.ModRevision, false, nil
			}
		}
		if resp.Header.Revision > seen && len(resp.Events) > 0 {
			seen = resp.Header.Revision
		}
	}
}

// streamName names the gRPC stream of generation gen, which all of a
// session's watches share (watches with the same metadata share a stream;
// the generation makes a new one after a stream went silent). One stream
// that stays open, the follower's watch keeping it so: a stream whose
// last watch closes is shut down, and the next watch would open a new
// one — a stream set up and torn down on the server per acquisition,
// more work than the watch cancel that a stream kept open costs.
func streamName(gen uint64) string { return "s" + strconv.FormatUint(gen, 10) }

// streamOf names the watch stream wctx's metadata selects.
func streamOf(wctx context.Context) string {
	md, _ := metadata.FromOutgoingContext(wctx)
	return strings.Join(md.Get("distlock-watch"), ",")
}

// existsAt reports whether the key created at createRev existed at revision
// rev. It first asks any member without going through the leader (exact,
// since every member that has applied rev holds the same state for it);
// a member that has not applied rev yet, or has compacted it, is answered
// by a linearizable read of the current state instead, which is as good:
// an entry present now was present at rev, since entries are never
// re-created.
//
// Each read is bounded by hedgeDelay, so that one that lands on a frozen
// member fails soon and the caller's retry goes to another.
func (s *Session) existsAt(ctx context.Context, key string, createRev, rev int64) (bool, error) {
	get := func(opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
		gctx, cancel := context.WithTimeout(ctx, s.hedgeDelay())
		defer cancel()
		return s.client.Get(gctx, key, append(opts, clientv3.WithKeysOnly())...)
	}
	resp, err := get(clientv3.WithRev(rev), clientv3.WithSerializable())
	if err != nil {
		resp, err = get()
		if err != nil {
			return false, err
		}
	}
	return len(resp.Kvs) == 1 && resp.Kvs[0].CreateRevision == createRev, nil
}
