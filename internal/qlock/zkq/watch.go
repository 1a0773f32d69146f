package zkq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/zkctx"
	"github.com/go-zookeeper/zk"
)

// retry runs f until it succeeds or fails other than transiently, or ctx
// ends.
func retry[T any](ctx context.Context, f func() (T, error)) (T, error) {
	for {
		v, err := zkctx.Call(ctx, f)
		if err == nil || !transient(err) || ctx.Err() != nil {
			return v, err
		}
		if err := ctxwait.Sleep(ctx, qlock.RetryDelay); err != nil {
			return v, err
		}
	}
}

// synced syncs path's server with the leader, so that it has seen every
// write before; a path that does not exist is no error.
func synced(ctx context.Context, conn *zk.Conn, path string) error {
	if _, err := retry(ctx, func() (string, error) { return conn.Sync(path) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}

// listChildren lists dir's children; a dir that does not exist has none.
func listChildren(ctx context.Context, conn *zk.Conn, dir string) ([]string, error) {
	c, err := retry(ctx, func() ([]string, error) {
		c, _, err := conn.Children(dir)
		return c, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	return c, err
}

// syncedChildren lists dir's children after a sync: every child made
// before is listed.
func syncedChildren(ctx context.Context, conn *zk.Conn, dir string) ([]string, error) {
	if err := synced(ctx, conn, dir); err != nil {
		return nil, err
	}
	return listChildren(ctx, conn, dir)
}

// stat reads path's Stat: nil if there is no such node.
func stat(ctx context.Context, conn *zk.Conn, path string) (*zk.Stat, error) {
	return retry(ctx, func() (*zk.Stat, error) {
		ok, st, err := conn.Exists(path)
		if err == nil && !ok {
			return nil, nil
		}
		return st, err
	})
}

// get reads path; ok is false if there is no such node.
func get(ctx context.Context, conn *zk.Conn, path string) ([]byte, bool, error) {
	data, err := retry(ctx, func() ([]byte, error) {
		d, _, err := conn.Get(path)
		return d, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, false, nil
	}
	return data, err == nil, err
}

// watched is what a GetW returned.
type watched struct {
	ch   <-chan zk.Event
	data []byte
	stat *zk.Stat
}

// getW reads path with a data watch. ok is false when path does not exist
// (and then no watch is left behind, unlike ExistsW).
func (s *Session) getW(ctx context.Context, path string) (w watched, ok bool, err error) {
	w, err = retry(ctx, func() (watched, error) {
		data, st, ch, err := s.conn.GetW(path)
		return watched{ch, data, st}, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return watched{}, false, nil
	}
	if err != nil {
		return watched{}, false, s.storeErr(err)
	}
	return w, true, nil
}

// watchErr is the error for a watch that ended without the node going:
// the session expired or the connection was closed.
func (s *Session) watchErr(ev zk.Event) error {
	if ev.Err != nil {
		return s.storeErr(ev.Err)
	}
	return s.expired("ended (watch cancelled)")
}

// goneCause says why one of this session's nodes was deleted: with the
// session, or by someone else. When a session is closed or expired on the
// servers, its ephemeral nodes' deletions can reach the client before the
// client learns that its session is gone, so the deletion alone does not
// tell. goneCause asks: a Sync answered on this session after the deletion
// event (answers and events arrive in order on one connection) proves the
// session outlived the deletion; the session ending, or the server
// reporting it expired, proves the opposite. It returns ctx's cause if ctx
// ends first.
func (s *Session) goneCause(ctx context.Context, path string) error {
	for {
		if !s.ours() {
			return s.expired("expired (its node " + path + " was deleted)")
		}
		if err := s.Err(); err != nil {
			return err
		}
		_, err := zkctx.Call(ctx, func() (string, error) { return s.conn.Sync("/") })
		switch {
		case err == nil && s.ours():
			if !time.Now().Before(s.Deadline()) {
				return fmt.Errorf("%w: past the client-side deadline; node %s deleted", distlock.ErrSessionExpired, path)
			}
			return fmt.Errorf("%w: node %s", distlock.ErrEntryGone, path)
		case errors.Is(err, zk.ErrSessionExpired), errors.Is(err, zk.ErrClosing):
			return s.storeErr(err)
		case ctx.Err() != nil:
			if err := s.Err(); err != nil {
				return err
			}
			return context.Cause(ctx)
		}
		if err := ctxwait.Sleep(ctx, qlock.RetryDelay); err != nil {
			if serr := s.Err(); serr != nil {
				return serr
			}
			return err
		}
	}
}
