package recipe

import (
	"context"
	"fmt"
	"path"
	"reflect"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
)

// Session is what every store's session has: its life (Done, Err,
// Deadline, Close) and the settings its locks share (Holder, Prefix, TTL).
// etcdlock.Session and zklock.Session embed it and add their store's own
// accessors. A Session is safe for concurrent use; one session serves many
// locks.
type Session struct {
	q     qlock.Session
	e     *qlock.Engine
	admin func() *qlock.Admin
}

func init() {
	qlock.Link.Session = func(q qlock.Session, e *qlock.Engine, admin func() *qlock.Admin) any {
		return &Session{q: q, e: e, admin: admin}
	}
	qlock.Link.Admin = func(a *qlock.Admin) any { return &Admin{a} }
}

// Backend is a store's session, as the constructors take it:
// *etcdlock.Session, *zklock.Session, or the *Session they embed.
type Backend interface{ recipeSession() *Session }

func (s *Session) recipeSession() *Session { return s }

// session returns b's Session for a new recipe (what: "mutex",
// "election", …) called name; for a nil b, an error wrapping
// distlock.ErrNilClient, named after the package of b's type (etcdlock,
// zklock; recipe when b is an untyped nil). A nil *etcdlock.Session in b
// would panic in the promoted method, hence the reflection.
func session(b Backend, what, name string) (*Session, error) {
	pkg := "recipe"
	if b != nil {
		v := reflect.ValueOf(b)
		if v.Kind() != reflect.Pointer || !v.IsNil() {
			if s := b.recipeSession(); s != nil {
				return s, nil
			}
		}
		pkg = path.Base(v.Type().Elem().PkgPath())
	}
	return nil, fmt.Errorf("%s: new %s %q: %w: the session is nil", pkg, what, name, distlock.ErrNilClient)
}

// Done returns a channel that is closed when the session ends: on Close,
// when the store reports it gone (an etcd lease revoked or expired, a
// ZooKeeper session expired), or when its client-side deadline (see
// Deadline) passes. The session's held locks are lost with it.
func (s *Session) Done() <-chan struct{} { return s.q.Done() }

// Err returns nil while the session lives, then why it ended: an error
// wrapping distlock.ErrSessionClosed (Close) or distlock.ErrSessionExpired
// (the store ended it, or the client-side deadline passed), or, on etcd,
// distlock.ErrHistoryRewound (an enqueue found the cluster's revision gone
// back, as after a restore from a snapshot without --bump-revision).
func (s *Session) Err() error { return s.q.Err() }

// Deadline returns the session's client-side expiry, before which the
// store cannot have ended the session: the send time of the last
// acknowledged etcd keepalive, or of the last answered ZooKeeper request,
// plus the TTL, less a safety margin (a fifth of the TTL on etcd; on
// ZooKeeper also the servers' tick, see zklock.WithTickTime). Past it, the
// session ends as expired, so a holder cut off from the cluster is told it
// lost its locks before the store can hand them on. On Linux it is moved
// earlier by the time the system spent suspended since then (Go's clocks
// stop during a suspend, the servers' do not), and a session that a
// resume finds past it ends at once.
func (s *Session) Deadline() time.Time { return s.q.Deadline() }

// Holder returns the value stored in the session's lock entries (the
// stores' WithHolder option): what tools listing a lock's queue
// (Admin.Inspect, distlock status) show as who holds or waits.
func (s *Session) Holder() string { return s.q.Holder() }

// Prefix returns where the session's locks keep their queues: a key
// prefix on etcd, a znode path on ZooKeeper (the stores' WithPrefix
// option, or their DefaultPrefix).
func (s *Session) Prefix() string { return s.q.Prefix() }

// TTL returns how long the store keeps the session's entries after the
// last sign of life: the etcd lease's TTL as the server granted it, the
// ZooKeeper session timeout as negotiated.
func (s *Session) TTL() time.Duration { return s.q.TTL() }

// Close ends the session: its held locks report distlock.ErrSessionClosed
// and its entries are deleted (the etcd lease is revoked, which deletes
// its keys at once; the ZooKeeper session's znodes are deleted, the
// session itself being the connection's). It waits for the session's
// background work. The client stays the caller's: Close does not close
// it. Calling Close again is a no-op.
func (s *Session) Close(ctx context.Context) error { return s.q.Close(ctx) }
