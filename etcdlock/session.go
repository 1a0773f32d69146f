package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

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
	MinTTL = 2 * time.Second

	// DefaultPrefix is the key prefix of a session made without WithPrefix.
	DefaultPrefix = "/distlock/"
)

// Option configures a Session. WithTTL is etcd's own; the others are
// zklock's too and mean the same there, but for what a prefix and an
// entry are on each store.
type Option func(*options)

type options struct {
	etcdq.Config
	lockDelay time.Duration // WithLockDelay
}

// WithTTL sets the session lease's TTL (default DefaultTTL). It is rounded
// up to whole seconds; less than MinTTL is an error wrapping
// distlock.ErrTTLTooShort.
func WithTTL(d time.Duration) Option { return func(o *options) { o.TTL = d } }

// WithPrefix sets the key prefix under which locks keep their queues
// (default DefaultPrefix). It must end in "/", or NewSession fails with
// an error wrapping distlock.ErrInvalidName: lock "x" lives under the
// prefix followed by the name, so prefix "myapp" and lock "x" would share
// keys with prefix "my" and lock "appx".
func WithPrefix(p string) Option { return func(o *options) { o.Prefix = p } }

// WithLogger makes the session and its locks log what they do; by default
// they are silent.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.Logger = l } }

// WithMeterProvider makes the session and its locks report metrics
// (distlock.lock.wait.duration, distlock.lock.held and the others that
// docs/operations.md lists) through mp. Default: OpenTelemetry's global
// provider, which drops them until the application installs an SDK.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.Observe.MeterProvider = mp }
}

// WithTracerProvider makes the session's locks trace Lock, TryLock,
// Unlock, Campaign and Resign, and record a lost lock as a span, through
// tp. Default: OpenTelemetry's global provider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.Observe.TracerProvider = tp }
}

// WithNameNormalizer maps each lock name to the value recorded as the
// distlock.lock attribute of metrics and spans. Lock names can be
// unbounded (one per tenant or job), and every distinct value is a time
// series: map "tenant-4711/ledger" to "tenant-*/ledger". Default: the name
// as is.
func WithNameNormalizer(f func(name string) string) Option {
	return func(o *options) { o.Observe.NameNormalizer = f }
}

// WithRevocable makes the session's holders revocable: an operator's
// Revoke (the distlock revoke command) makes a held Lease's Done close
// with a *distlock.RevokedError (errors.Is(err, distlock.ErrRevoked)),
// asking it to finish and Unlock within the revocation's grace period;
// the lock stays held until then (see distlock.RevokeRequest). Each held
// lock costs one watch (on its revocation record's key, from the entry's revision). Without it a
// holder learns of a revocation only when it is forced: its entry is
// deleted and the lock lost (distlock.ErrEntryGone).
func WithRevocable() Option { return func(o *options) { o.Revocable = true } }

// WithHolder sets the value stored in this session's lock entries, so that
// tools listing a lock's queue can say who waits (e.g. "host:pid").
func WithHolder(v string) Option { return func(o *options) { o.Holder = v } }

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
func NewSession(ctx context.Context, client *clientv3.Client, opts ...Option) (*Session, error) {
	o := options{Config: etcdq.Config{TTL: DefaultTTL, Options: qlock.Options{Prefix: DefaultPrefix}}}
	for _, opt := range opts {
		opt(&o)
	}
	if err := checkLockDelay(o.lockDelay); err != nil {
		return nil, err
	}
	c := o.Config
	if c.TTL < MinTTL {
		return nil, fmt.Errorf("etcdlock: new session: %w: %v is below the minimum %v (the keepalive runs every third of the TTL and needs a safety margin)", distlock.ErrTTLTooShort, c.TTL, MinTTL)
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
	d.SetLockDelay(o.lockDelay)
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
