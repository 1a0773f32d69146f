package zkq

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/go-zookeeper/zk"
)

// Revocation records (see distlock.Revocation) live beside the lock's
// directory, one persistent znode per revoked holder, so that they outlive
// holder and revoker:
//
//	PREFIX/@revoke/NAME/@req           the bell: its data is set after each new record
//	PREFIX/@revoke/NAME/@req/TOKEN     TOKEN: qlock.RevokeKey of the holder's czxid
//
// '@' never occurs in lock names, so the records of lock "a" and "a/b"
// never mix.
//
// A holder cannot watch its own record's path: an exists watch on a path
// that is never created stays on the server until the session ends, one
// per acquisition. So a session's revocable holders of one lock share one
// watch on the bell, which the revoker rings after each record it makes:
// it costs a hold one read (its own record), and a revocation one read
// per holder in each session that follows the lock.

// RevokeDir returns the znode under which lock name's revocation records
// are kept.
func RevokeDir(prefix, name string) string { return prefix + "/@revoke/" + name + "/@req" }

// bell is the watch of one revocation directory, shared by a session's
// revocable holders of that lock.
type bell struct {
	dir     string
	holders map[*qlock.Node]func([]byte)
	running bool // a goroutine keeps the watch
}

// FollowRevoke calls revoked when n's revocation record appears, until
// n.Alive() ends (qlock.RevokeFollower).
func (s *Session) FollowRevoke(n *qlock.Node, name string, revoked func(data []byte)) {
	dir := RevokeDir(s.prefix, name)
	var once sync.Once
	call := func(data []byte) {
		if n.Alive().Err() == nil {
			once.Do(func() { revoked(data) })
		}
	}
	s.mu.Lock()
	b := s.bells[dir]
	if b == nil {
		b = &bell{dir: dir, holders: map[*qlock.Node]func([]byte){}}
		if s.bells == nil {
			s.bells = map[string]*bell{}
		}
		s.bells[dir] = b
	}
	b.holders[n] = call
	start := !b.running
	b.running = true
	s.mu.Unlock()
	context.AfterFunc(n.Alive(), func() {
		s.mu.Lock()
		delete(b.holders, n)
		s.mu.Unlock()
	})
	if start {
		// The watch is set first, then every holder's record read: a record
		// made before the watch is read, one made after rings it.
		s.Go(func(ctx context.Context) { s.ring(ctx, b) })
		return
	}
	// The watch is set already: a record made before it rang it, one
	// made after is read here.
	s.Go(func(ctx context.Context) { s.checkRevoked(ctx, b.dir, n, call) })
}

// ring keeps b's watch while b has holders, reading their records each
// time it fires.
func (s *Session) ring(ctx context.Context, b *bell) {
	for {
		ch, err := retry(ctx, func() (<-chan zk.Event, error) {
			_, _, ch, err := s.conn.ExistsW(b.dir)
			return ch, err
		})
		if err != nil {
			if ctxwait.Sleep(ctx, qlock.RetryDelay) != nil {
				return
			}
			continue
		}
		s.mu.Lock()
		hs := maps.Clone(b.holders)
		s.mu.Unlock()
		for n, f := range hs {
			s.checkRevoked(ctx, b.dir, n, f)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
		s.mu.Lock()
		if len(b.holders) == 0 {
			b.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

// checkRevoked reads n's record and calls f with it if there is one.
func (s *Session) checkRevoked(ctx context.Context, dir string, n *qlock.Node, f func([]byte)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(n.Alive(), cancel)()
	if data, ok, err := get(ctx, s.conn, dir+"/"+qlock.RevokeKey(n.Token)); err == nil && ok {
		f(data)
	}
}

// ClientStore is qlock.ClientStore on a ZooKeeper connection.
type ClientStore struct {
	Conn   *zk.Conn
	Prefix string
	// ACL is the records' (nil: zk.WorldACL(zk.PermAll)).
	ACL []zk.ACL
}

var _ qlock.ClientStore = ClientStore{}

// Backend is ZooKeeper (qlock.ClientStore).
func (ClientStore) Backend() qlock.Backend { return Backend }

func (r ClientStore) acl() []zk.ACL {
	if r.ACL == nil {
		return zk.WorldACL(zk.PermAll)
	}
	return r.ACL
}

// CreateRevocation makes token seq's record if there is none, then rings the bell;
// it returns the existing record otherwise.
func (r ClientStore) CreateRevocation(ctx context.Context, name string, seq int64, data []byte) ([]byte, error) {
	dir := RevokeDir(r.Prefix, name)
	if _, err := mkdirs(ctx, r.Conn, r.acl(), dir); err != nil {
		return nil, err
	}
	path := dir + "/" + qlock.RevokeKey(seq)
	_, err := retry(ctx, func() (string, error) { return r.Conn.Create(path, data, zk.FlagPersistent, r.acl()) })
	var old []byte
	if errors.Is(err, zk.ErrNodeExists) {
		// Rung again for a record that exists: its first revoker may have
		// stopped before it rang.
		if old, _, err = get(ctx, r.Conn, path); bytes.Equal(old, data) { // none: pruned meanwhile
			old = nil // ours: a create whose answer was lost, then retried
		}
	}
	if err != nil {
		return nil, err
	}
	return old, r.ring(ctx, dir, seq)
}

// ring sets the bell's data, which revocable holders watch.
func (r ClientStore) ring(ctx context.Context, dir string, seq int64) error {
	_, err := retry(ctx, func() (*zk.Stat, error) { return r.Conn.Set(dir, []byte(qlock.RevokeKey(seq)), -1) })
	return err
}

// UpdateRevocation replaces token seq's record.
func (r ClientStore) UpdateRevocation(ctx context.Context, name string, seq int64, data []byte) error {
	path := RevokeDir(r.Prefix, name) + "/" + qlock.RevokeKey(seq)
	_, err := retry(ctx, func() (*zk.Stat, error) { return r.Conn.Set(path, data, -1) })
	return err
}

// records returns the names of lock name's records, oldest holder first,
// after a sync: the server answering has seen every record written
// before.
func (r ClientStore) records(ctx context.Context, name string) ([]string, error) {
	children, err := syncedChildren(ctx, r.Conn, RevokeDir(r.Prefix, name))
	if err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(children, func(c string) bool { return len(c) != len(qlock.RevokeKey(0)) || c[0] < '0' || c[0] > '9' })
	slices.Sort(out)
	return out, nil
}

// ListRevocations reads lock name's records, oldest holder first.
func (r ClientStore) ListRevocations(ctx context.Context, name string) ([][]byte, error) {
	names, err := r.records(ctx, name)
	if err != nil {
		return nil, err
	}
	dir := RevokeDir(r.Prefix, name)
	var out [][]byte
	for _, c := range names {
		data, ok, err := get(ctx, r.Conn, dir+"/"+c)
		if err != nil {
			return nil, err
		}
		if ok { // else pruned meanwhile
			out = append(out, data)
		}
	}
	return out, nil
}

// PruneRevocations deletes all but the newest keep records, the oldest first.
func (r ClientStore) PruneRevocations(ctx context.Context, name string, keep int) error {
	names, err := r.records(ctx, name)
	if err != nil {
		return err
	}
	dir := RevokeDir(r.Prefix, name)
	for _, c := range names[:max(len(names)-keep, 0)] {
		_, err := retry(ctx, func() (struct{}, error) { return struct{}{}, r.Conn.Delete(dir+"/"+c, -1) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	return nil
}

// WaitDeleted returns once e's znode is gone or is another node: its czxid is
// not e's position (qlock.Position; an election leader's token is its
// term's, not its node's).
func (r ClientStore) WaitDeleted(ctx context.Context, e distlock.QueueEntry) error {
	for {
		type exists struct {
			ok bool
			st *zk.Stat
			ch <-chan zk.Event
		}
		x, err := retry(ctx, func() (exists, error) {
			ok, st, ch, err := r.Conn.ExistsW(e.Key)
			return exists{ok, st, ch}, err
		})
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return err
		}
		if !x.ok || x.st.Czxid != qlock.Position(e) {
			return nil
		}
		select {
		case <-x.ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// DeleteEntry deletes e's znode only if it is still e's (its czxid is e's
// position, qlock.Position): a look, then a delete of the version looked
// at.
func (r ClientStore) DeleteEntry(ctx context.Context, e distlock.QueueEntry) (gone bool, err error) {
	for {
		st, err := stat(ctx, r.Conn, e.Key)
		if err != nil {
			return false, err
		}
		if st == nil || st.Czxid != qlock.Position(e) {
			return true, nil
		}
		_, err = retry(ctx, func() (struct{}, error) { return struct{}{}, r.Conn.Delete(e.Key, st.Version) })
		switch {
		case err == nil:
			return false, nil
		case errors.Is(err, zk.ErrNoNode):
			return true, nil
		case !errors.Is(err, zk.ErrBadVersion):
			return false, err
		}
	}
}
