package zkq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/go-zookeeper/zk"
)

// create creates an entry node named base plus a sequence number in dir,
// with data, creating dir as needed (the protected create). A create cut
// off by a connection loss may have happened: the node is then looked for
// by its GUID. On failure nothing is left behind (a cleanup runs on in the
// background if needed).
func (s *Session) create(ctx context.Context, dir, base, guid string, data []byte) (string, error) {
	for {
		ch := make(chan createResult, 1)
		go func() {
			p, err := s.conn.Create(dir+"/"+base, data, zk.FlagEphemeral|zk.FlagSequence, s.acl)
			ch <- createResult{p, err}
		}()
		var r createResult
		select {
		case r = <-ch:
		case <-ctx.Done():
			s.abandonCreate(ch, dir, guid)
			return "", context.Cause(ctx)
		}
		switch {
		case r.err == nil:
			s.remember(r.path)
			return r.path, nil
		case errors.Is(r.err, zk.ErrNoNode):
			if err := s.ensureDir(ctx, dir); err != nil {
				return "", err
			}
		case errors.Is(r.err, zk.ErrConnectionClosed):
			// Sent, maybe applied: look for it once the client is back.
			p, err := s.findGUID(ctx, dir, guid)
			if err != nil {
				s.abandonGUID(dir, guid)
				return "", err
			}
			if p != "" {
				s.remember(p)
				return p, nil
			}
			// Not made. Create again only while the connection has this
			// session: after an expiry the client starts a new session by
			// itself, and a node created in it would belong to no Session.
			if !s.ours() {
				return "", s.expired("expired (a create was cut off by a connection loss)")
			}
		case transient(r.err):
			// Never sent.
			if err := ctxwait.Sleep(ctx, qlock.RetryDelay); err != nil {
				return "", err
			}
		default:
			return "", s.storeErr(r.err)
		}
	}
}

// ensureDir creates dir and its parents as container nodes (persistent
// nodes where the server has no containers).
func (s *Session) ensureDir(ctx context.Context, dir string) error {
	p, err := mkdirs(ctx, s.conn, s.acl, dir)
	if err != nil {
		return fmt.Errorf("create %s: %w", p, s.storeErr(err))
	}
	return nil
}

// mkdirs creates dir and its parents on conn as container nodes
// (persistent nodes where the server has no containers); on failure it
// returns the path it could not create.
func mkdirs(ctx context.Context, conn *zk.Conn, acl []zk.ACL, dir string) (string, error) {
	for i := 1; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		p := dir[:i]
		_, err := retry(ctx, func() (string, error) {
			return conn.CreateContainer(p, nil, zk.FlagContainer, acl)
		})
		if unimplemented(err) {
			_, err = retry(ctx, func() (string, error) { return conn.Create(p, nil, zk.FlagPersistent, acl) })
		}
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return p, err
		}
	}
	return "", nil
}

// findGUID looks for the entry with guid in dir, after a sync so that the
// server answering has seen every write the leader committed before.
func (s *Session) findGUID(ctx context.Context, dir, guid string) (string, error) {
	children, err := syncedChildren(ctx, s.conn, dir)
	if err != nil {
		return "", s.storeErr(err)
	}
	for _, c := range children {
		if _, g, _, ok := parseAny(c); ok && g == guid {
			return dir + "/" + c, nil
		}
	}
	return "", nil
}

// abandonCreate cleans up after a Lock that gave up while its create was in
// flight: it waits (up to qlock.AbandonTimeout, then in the background) for the
// create's result and deletes whatever it made. The result always comes:
// go-zookeeper answers every request, with ErrConnectionClosed when the
// connection is lost before the reply, ErrClosing when it is closed.
func (s *Session) abandonCreate(ch <-chan createResult, dir, guid string) {
	finish := func(r createResult) {
		switch {
		case r.err == nil:
			s.remember(r.path)
			s.abandon(r.path)
		case errors.Is(r.err, zk.ErrConnectionClosed):
			s.abandonGUID(dir, guid)
		}
	}
	t := time.NewTimer(qlock.AbandonTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		finish(r)
	case <-t.C:
		go func() { finish(<-ch) }()
	}
}

// abandonGUID deletes, in the background, the entry with guid in dir if a
// create cut off by a connection loss made it. The look for it follows a
// sync on the server the client is now connected to; a create still on its
// way from the server the connection was lost to is refused once the
// session has moved (ZooKeeper's session-moved check), so if the look does
// not find it, it never appears.
func (s *Session) abandonGUID(dir, guid string) {
	go qlock.Retry(context.Background(), s.timeout, s.timeout/6, s.ours, func(ctx context.Context) bool {
		p, err := s.findGUID(ctx, dir, guid)
		switch {
		case err == nil && p != "":
			s.remember(p)
			s.abandon(p)
		case err != nil && !retryCleanup(err):
			s.Log().Warn("zklock: cleanup abandoned", "dir", dir, "guid", guid, "err", err)
		case err != nil:
			return false
		}
		return true
	})
}

// createResult is the outcome of a create request.
type createResult struct {
	path string
	err  error
}

// unimplemented reports whether the server refused a container create
// because it has no containers (before 3.5.3).
func unimplemented(err error) bool {
	// go-zookeeper has no error for code -6 (Unimplemented).
	return err != nil && (strings.HasSuffix(err.Error(), "unknown error: -6") || strings.Contains(strings.ToLower(err.Error()), "unimplemented"))
}

// createAll is create for a multi-lock: one entry node named base plus a
// sequence number in each of dirs, all created by one multi (one zxid),
// creating the dirs as needed. A multi cut off by a connection loss made
// all of the nodes or none: they are looked for by their common GUID. On
// failure nothing is left behind.
func (s *Session) createAll(ctx context.Context, dirs []string, base, guid string, data []byte) ([]string, error) {
	ops := make([]any, len(dirs))
	for i, dir := range dirs {
		ops[i] = &zk.CreateRequest{Path: dir + "/" + base, Data: data, Acl: s.acl, Flags: zk.FlagEphemeral | zk.FlagSequence}
	}
	for {
		ch := make(chan multiResult, 1)
		go func() {
			rs, err := s.conn.Multi(ops...)
			ch <- multiResult{rs, err}
		}()
		var r multiResult
		select {
		case r = <-ch:
		case <-ctx.Done():
			s.abandonCreateAll(ch, dirs, guid)
			return nil, context.Cause(ctx)
		}
		err := r.firstErr()
		switch {
		case err == nil:
			paths := make([]string, len(r.rs))
			for i, x := range r.rs {
				paths[i] = x.String
				s.remember(x.String)
			}
			return paths, nil
		case errors.Is(err, zk.ErrNoNode):
			for _, dir := range dirs {
				if err := s.ensureDir(ctx, dir); err != nil {
					return nil, err
				}
			}
		case errors.Is(err, zk.ErrConnectionClosed):
			// Sent, maybe applied: look for them once the client is back.
			paths, err := s.findGUIDs(ctx, dirs, guid)
			if err != nil {
				s.abandonGUIDs(dirs, guid)
				return nil, err
			}
			if paths != nil {
				return paths, nil
			}
			if !s.ours() {
				return nil, s.expired("expired (a create was cut off by a connection loss)")
			}
		case transient(err):
			// Never sent.
			if err := ctxwait.Sleep(ctx, qlock.RetryDelay); err != nil {
				return nil, err
			}
		default:
			return nil, s.storeErr(err)
		}
	}
}

// multiResult is the outcome of a multi request.
type multiResult struct {
	rs  []zk.MultiResponse
	err error
}

// firstErr is the error of the op that made the multi fail (ZooKeeper
// reports success for the ops before it and a runtime inconsistency for
// those after), or of the request.
func (r multiResult) firstErr() error {
	if r.err != nil {
		return r.err
	}
	for _, x := range r.rs {
		if x.Error != nil {
			return x.Error
		}
	}
	return nil
}

// findGUIDs looks for the nodes with guid in dirs, which one multi made
// all or none of: their paths, remembered as the session's, or nil if
// there are none. Nodes found in some dirs only (the others deleted by
// someone else meanwhile) are removed, and the create failed.
func (s *Session) findGUIDs(ctx context.Context, dirs []string, guid string) ([]string, error) {
	paths := make([]string, len(dirs))
	found := 0
	for i, dir := range dirs {
		p, err := s.findGUID(ctx, dir, guid)
		if err != nil {
			return nil, err
		}
		if p != "" {
			s.remember(p)
			paths[i] = p
			found++
		}
	}
	switch found {
	case 0:
		return nil, nil
	case len(dirs):
		return paths, nil
	}
	for _, p := range paths {
		if p != "" {
			s.abandon(p)
		}
	}
	return nil, fmt.Errorf("%w: a multi-lock's entry with GUID %s was deleted before its create was confirmed", distlock.ErrEntryGone, guid)
}

// abandonCreateAll is abandonCreate for a createAll's multi.
func (s *Session) abandonCreateAll(ch <-chan multiResult, dirs []string, guid string) {
	finish := func(r multiResult) {
		err := r.firstErr()
		switch {
		case err == nil:
			for _, x := range r.rs {
				s.remember(x.String)
				s.abandon(x.String)
			}
		case errors.Is(err, zk.ErrConnectionClosed):
			s.abandonGUIDs(dirs, guid)
		}
	}
	t := time.NewTimer(qlock.AbandonTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		finish(r)
	case <-t.C:
		go func() { finish(<-ch) }()
	}
}

// abandonGUIDs is abandonGUID in each of dirs.
func (s *Session) abandonGUIDs(dirs []string, guid string) {
	for _, dir := range dirs {
		s.abandonGUID(dir, guid)
	}
}
