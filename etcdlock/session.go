package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/diagnose"
	"github.com/distlock/distlock/internal/diagstart"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/qlock/etcdq"
	"github.com/distlock/distlock/recipe"
)

const (
	// DefaultTTL is the lease TTL of a session made without WithTTL. A
	// crashed holder blocks its successors for at most this long; a
	// partitioned holder is told it lost the lock a fifth of it sooner.
	DefaultTTL = 30 * time.Second

	// MinTTL is the shortest TTL a session accepts. etcd counts lease TTLs in
	// whole seconds and servers raise short ones to about 1.5 election
	// timeouts anyway; below two seconds the keepalive, sent every third of
	// the TTL, would leave no room for the safety margin.
	MinTTL = etcdq.MinTTL

	// DefaultPrefix is the key prefix of a session made without WithPrefix.
	DefaultPrefix = "/distlock/"
)

// WithTTL sets the session lease's TTL (default DefaultTTL). It is rounded
// up to whole seconds; less than MinTTL is an error wrapping
// distlock.ErrTTLTooShort. The other options of a session are package
// recipe's, the same on both stores.
func WithTTL(d time.Duration) recipe.Option {
	return qlock.Link.Own(qlock.Own{Pkg: "etcdlock", Name: "WithTTL", Set: func(c any) { c.(*etcdq.Config).TTL = d }}).(recipe.Option)
}

// Session is one etcd lease kept alive in the background. Lock entries are
// bound to it, so they vanish when it ends. It embeds recipe.Session,
// what every store's session has (Done, Err, Deadline, Holder, Prefix,
// TTL, Close); Client and ID are etcd's own. The recipes of package
// recipe take it: recipe.NewMutex(sess, "name").
//
// A session ends when Close is called, when the server reports the lease
// gone, or — conservatively — when no keepalive has been confirmed in time:
// the client-side deadline is the send time of the last acknowledged
// keepalive plus the TTL the server granted, minus a margin of a fifth of
// the TTL. The server cannot expire the lease before that send time plus
// the TTL, since it counts from when it received the keepalive; so a holder
// cut off from the cluster is told it lost its locks before the server can
// give them to someone else. (A paused process hears nothing in time: that
// is what fencing tokens are for.) Once ended, a session stops its
// keepalives and revokes its lease, best effort, so that waiters behind its
// entries do not wait for the server to expire it. Close revokes the
// lease, which deletes all its lock entries.
//
// A Session is safe for concurrent use. Use one session for many locks.
type Session struct {
	*recipe.Session // what every store's session has
	d               *etcdq.Session
}

// NewSession grants a lease on client and keeps it alive until Close or the
// session ends. The client stays the caller's: Close does not close it.
//
// When the lease is not granted within a second, NewSession probes the
// client's endpoints (package diagnose): if none can be used in a way
// that waiting will not mend (connection refused, unknown host, no port,
// TLS on one side only, not etcd), it fails at once, with an error that
// names each endpoint and matches (errors.Is) diagnose's sentinels, such
// as diagnose.ErrRefused; otherwise it waits for ctx, and an error for
// ctx's end carries the diagnosis too.
func NewSession(ctx context.Context, client *clientv3.Client, opts ...recipe.Option) (*Session, error) {
	c := etcdq.Config{TTL: DefaultTTL, Options: qlock.Options{Prefix: DefaultPrefix}}
	qlock.Link.Apply(&c.Options, opts)
	if err := c.Apply("etcdlock", &c); err != nil {
		return nil, err
	}
	if err := checkPrefix(c.Prefix); err != nil {
		return nil, fmt.Errorf("etcdlock: new session: %w", err)
	}
	c.Options = c.Defaults()
	if client == nil {
		_, err := etcdq.NewSession(ctx, client, c)
		return nil, err
	}
	// The client retries a dead endpoint silently until ctx ends, or
	// forever: when the lease is not granted within a second, the
	// endpoints are probed, and a cluster that cannot be reached is
	// reported at once.
	d, err := diagstart.Run(ctx, func(ctx context.Context) (*etcdq.Session, error) {
		return etcdq.NewSession(ctx, client, c)
	}, func(ctx context.Context) error { return probeEtcd(ctx, client.Endpoints()) }, true)
	if derr, ok := err.(*diagnose.Error); ok {
		return nil, fmt.Errorf("etcdlock: new session: %w", derr)
	}
	if err != nil {
		return nil, err
	}
	d.SetLockDelay(c.LockDelay)
	u := d.User()
	admin := func() *qlock.Admin { return newAdmin(client, c.Prefix, u.Holder()) }
	return &Session{Session: qlock.Link.Session(u, d.Engine(), admin).(*recipe.Session), d: d}, nil
}

// checkPrefix checks a key prefix (WithPrefix). Without the trailing
// "/", prefix "my" and lock "appx" would share keys with prefix "myapp"
// and lock "x".
func checkPrefix(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: empty key prefix (the default is %q)", distlock.ErrInvalidName, DefaultPrefix)
	case !strings.HasSuffix(p, "/"):
		return fmt.Errorf("%w: key prefix %q does not end in \"/\": write %q", distlock.ErrInvalidName, p, p+"/")
	}
	return nil
}

// probeEtcd diagnoses the client's endpoints. The client's TLS
// configuration is not to be read from it: on an endpoint without a
// scheme, the probe talks plain, and a TLS server there is no verdict (it
// is one only for a plain client).
func probeEtcd(ctx context.Context, endpoints []string) error {
	err := diagnose.Etcd(ctx, endpoints, nil)
	var derr *diagnose.Error
	if !errors.As(err, &derr) {
		return err
	}
	some := false
	for i, v := range derr.Endpoints {
		if errors.Is(v.Err, diagnose.ErrTLSRequired) && !strings.Contains(v.Endpoint, "://") {
			derr.Endpoints[i].Err, derr.Endpoints[i].Detail = nil, ""
		}
		some = some || derr.Endpoints[i].Err != nil
	}
	if !some {
		return nil
	}
	return derr
}

// Client returns the client the session was made with.
func (s *Session) Client() *clientv3.Client { return s.d.Client() }

// ID returns the ID of the session's lease: the Owner of its fencing
// tokens.
func (s *Session) ID() clientv3.LeaseID { return s.d.ID() }
