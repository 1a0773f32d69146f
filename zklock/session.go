package zklock

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/diagnose"
	"github.com/distlock/distlock/internal/diagstart"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/qlock/zkq"
	"github.com/distlock/distlock/recipe"
)

const (
	// DefaultPrefix is the znode under which a session made without
	// WithPrefix keeps its locks' directories.
	DefaultPrefix = "/distlock"

	// MinTTL is the shortest session timeout a session accepts.
	MinTTL = zkq.MinTTL

	// DefaultTickTime is the servers' tickTime a session assumes without
	// WithTickTime when the server does not tell it: ZooKeeper's default.
	DefaultTickTime = zkq.DefaultTickTime
)

// WithSessionTimeout gives the session timeout the connection negotiated
// with the server. It must not be longer than the negotiated one, or the
// client-side deadline is no longer conservative. Without it, NewSession
// reads the negotiated timeout from the connection.
func WithSessionTimeout(d time.Duration) recipe.Option {
	return own("WithSessionTimeout", func(c *config) { c.Timeout = d })
}

// WithTickTime tells the session the servers' tickTime. Without it,
// NewSession asks the server it is connected to (the "conf" four-letter
// word, where the server allows it) and otherwise assumes
// DefaultTickTime. The client-side deadline must leave room for
// followers reporting client activity to the leader only every half tick,
// so a tick longer than the one given makes the "lost" signal late, and a
// shorter one makes it early. Keep the tick at most an eighth of the
// session timeout for one failed server not to cost a session.
func WithTickTime(d time.Duration) recipe.Option {
	return own("WithTickTime", func(c *config) { c.Tick, c.tickSet = d, true })
}

// WithACL sets the ACL of the znodes the session creates (default
// zk.WorldACL(zk.PermAll)).
func WithACL(acl []zk.ACL) recipe.Option { return own("WithACL", func(c *config) { c.ACL = acl }) }

// config is what a session's options set.
type config struct {
	zkq.Config
	tickSet bool // WithTickTime was given
}

// own is a zklock option called name that sets c.
func own(name string, set func(c *config)) recipe.Option {
	return qlock.Link.Own(qlock.Own{Pkg: "zklock", Name: name, Set: func(c any) { set(c.(*config)) }}).(recipe.Option)
}

// NewSession waits until conn has a ZooKeeper session and follows it until
// Close or the session ends. The connection stays the caller's: Close does
// not close it, and its event channel is left alone.
//
// When conn has no session within a second, NewSession probes its
// servers (package diagnose): if none can be used in a way that waiting
// will not mend (connection refused, TLS, not ZooKeeper), it fails at
// once, with an error that names each server and matches (errors.Is)
// diagnose's sentinels, such as diagnose.ErrRefused; otherwise it waits
// for ctx, and an error for ctx's end carries the diagnosis too.
func NewSession(ctx context.Context, conn *zk.Conn, opts ...recipe.Option) (*Session, error) {
	o := config{Config: zkq.Config{Options: qlock.Options{Prefix: DefaultPrefix}, ACL: zk.WorldACL(zk.PermAll)}}
	qlock.Link.Apply(&o.Options, opts)
	if err := o.Apply("zklock", &o); err != nil {
		return nil, err
	}
	if err := zkq.CheckPrefix(o.Prefix); err != nil {
		return nil, fmt.Errorf("zklock: new session: %w", err)
	}
	if o.Tick < 0 || o.tickSet && o.Tick == 0 {
		return nil, fmt.Errorf("zklock: new session: tick time %v is not positive", o.Tick)
	}
	o.Options = o.Defaults()
	if conn == nil {
		_, err := zkq.NewSession(ctx, conn, o.Config)
		return nil, err
	}
	// The connection retries a dead server silently until ctx ends, or
	// forever: when it has no session within a second, the servers are
	// probed, and an ensemble that cannot be reached is reported at once.
	servers, all := zkServers(conn)
	d, err := diagstart.Run(ctx, func(ctx context.Context) (*zkq.Session, error) {
		return zkq.NewSession(ctx, conn, o.Config)
	}, func(ctx context.Context) error {
		if !all {
			servers = []string{conn.Server()}
		}
		return diagnose.ZooKeeper(ctx, servers)
	}, all)
	if derr, ok := err.(*diagnose.Error); ok {
		return nil, fmt.Errorf("zklock: new session: %w", derr)
	}
	if err != nil {
		return nil, err
	}
	d.SetLockDelay(o.LockDelay)
	u := d.User()
	admin := func() *qlock.Admin { return newAdmin(conn, o.Prefix, o.ACL, u.Holder()) }
	return &Session{Session: qlock.Link.Session(u, d.Engine(), admin).(*recipe.Session), d: d, acl: o.ACL}, nil
}

// zkServers returns the servers conn connects to, and whether they are
// all of them. go-zookeeper does not list them; its default host provider
// keeps them (resolved, with ports) in a field that reflection reads. For
// another provider (zk.WithHostProvider), only the server conn tries at
// the time is known, and NewSession does not fail on its diagnosis alone.
func zkServers(conn *zk.Conn) ([]string, bool) {
	hp := reflect.ValueOf(conn).Elem().FieldByName("hostProvider")
	if !hp.IsValid() || hp.Kind() != reflect.Interface || hp.IsNil() {
		return nil, false
	}
	p := hp.Elem()
	if p.Kind() != reflect.Pointer || p.IsNil() || p.Type() != reflect.TypeOf((*zk.DNSHostProvider)(nil)) {
		return nil, false
	}
	f := p.Elem().FieldByName("servers")
	if !f.IsValid() || f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.String || f.Len() == 0 {
		return nil, false
	}
	servers := make([]string, f.Len())
	for i := range servers {
		servers[i] = f.Index(i).String()
	}
	return servers, true
}

// Session follows one ZooKeeper session of a *zk.Conn the caller owns. Lock
// nodes are ephemeral nodes of that session, so they vanish when it ends.
// Its methods Done, Err, Deadline, Holder, Prefix, TTL (the session
// timeout) and Close are those of every distlock session; Conn, ID and
// TickTime are ZooKeeper's own.
//
// A Session ends when Close is called (distlock.ErrSessionClosed), when
// the ZooKeeper session expires (distlock.ErrSessionExpired), or when no
// request has been answered for the session timeout less a margin (7/8 of
// it with a short enough tick), counted from its send time
// (ErrSessionExpired too; see the package documentation). An ended Session
// stays ended even if the connection recovers the ZooKeeper session; make
// a new one. Close deletes the session's lock nodes (the ZooKeeper session
// itself, which belongs to the connection, stays open); it does not wait
// for the cleanups of failed Locks, which outlive the Session until they
// succeed, the connection loses the ZooKeeper session, or the connection is
// closed, because the nodes they remove outlive it too.
//
// A Session is safe for concurrent use. Use one session for many locks.
type Session struct {
	*recipe.Session // what every store's session has
	d               *zkq.Session
	acl             []zk.ACL // of the znodes it creates, for its locks' slot markers too
}

// Conn returns the connection the session follows.
func (s *Session) Conn() *zk.Conn { return s.d.Conn() }

// ID returns the ZooKeeper session ID: the Owner of its fencing tokens.
func (s *Session) ID() int64 { return s.d.ID() }

// TickTime returns the servers' tickTime the client-side deadline allows
// for (see WithTickTime).
func (s *Session) TickTime() time.Duration { return s.d.TickTime() }
