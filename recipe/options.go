package recipe

import (
	"log/slog"
	"time"

	"github.com/distlock/distlock/internal/qlock"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures a session: etcdlock.NewSession and zklock.NewSession
// take the options of this package, which mean the same on both stores,
// and those of their own package (etcdlock.WithTTL, zklock.WithACL, …),
// which are of this type too. A store's own option given to the other
// store's NewSession is an error wrapping distlock.ErrInvalidOption. The
// zero Option sets nothing.
type Option struct{ set func(*qlock.Options) }

func init() {
	qlock.Link.Own = func(x qlock.Own) any {
		return Option{func(o *qlock.Options) { o.Own = append(o.Own, x) }}
	}
	qlock.Link.Apply = func(dst *qlock.Options, opts any) {
		for _, o := range opts.([]Option) {
			if o.set != nil { // the zero Option sets nothing
				o.set(dst)
			}
		}
	}
}

// WithPrefix sets where the session's locks keep their queues: on etcd a
// key prefix that must end in "/" (default etcdlock.DefaultPrefix), on
// ZooKeeper an absolute znode path without a trailing "/" and without an
// empty step (default zklock.DefaultPrefix). Anything else makes
// NewSession fail with an error wrapping distlock.ErrInvalidName that says
// what to write. Lock "x" lives under the prefix followed by the name, so
// an etcd prefix "myapp" and lock "x" would share keys with prefix "my"
// and lock "appx".
func WithPrefix(p string) Option { return Option{func(o *qlock.Options) { o.Prefix = p }} }

// WithLogger makes the session and its locks log what they do; by default
// they are silent.
func WithLogger(l *slog.Logger) Option { return Option{func(o *qlock.Options) { o.Logger = l }} }

// WithMeterProvider makes the session and its locks report metrics
// (distlock.lock.wait.duration, distlock.lock.held and the others that
// docs/operations.md lists) through mp. Default: OpenTelemetry's global
// provider, which drops them until the application installs an SDK.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return Option{func(o *qlock.Options) { o.Observe.MeterProvider = mp }}
}

// WithTracerProvider makes the session's locks trace Lock, TryLock,
// Unlock, Campaign and Resign, and record a lost lock as a span, through
// tp. Default: OpenTelemetry's global provider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return Option{func(o *qlock.Options) { o.Observe.TracerProvider = tp }}
}

// WithNameNormalizer maps each lock name to the value recorded as the
// distlock.lock attribute of metrics and spans. Lock names can be
// unbounded (one per tenant or job), and every distinct value is a time
// series: map "tenant-4711/ledger" to "tenant-*/ledger". Default: the name
// as is.
func WithNameNormalizer(f func(name string) string) Option {
	return Option{func(o *qlock.Options) { o.Observe.NameNormalizer = f }}
}

// WithRevocable makes the session's holders revocable: an operator's
// Revoke (Admin.Revoke, the distlock revoke command) makes a held Lease's
// Done close with a *distlock.RevokedError (errors.Is(err,
// distlock.ErrRevoked)), asking it to finish and Unlock within the
// revocation's grace period; the lock stays held until then (see
// distlock.RevokeRequest). Each held lock costs one watch on etcd (its
// revocation record's key); on ZooKeeper one read of its record, and the
// session one watch per lock name while it holds it. Without it a holder
// learns of a revocation only when it is forced: its entry is deleted and
// the lock lost (distlock.ErrEntryGone).
func WithRevocable() Option { return Option{func(o *qlock.Options) { o.Revocable = true }} }

// WithHolder sets the value stored in the session's lock entries, so that
// tools listing a lock's queue can say who waits (e.g. "host:pid").
func WithHolder(v string) Option { return Option{func(o *qlock.Options) { o.Holder = v }} }

// WithLockDelay makes the session's Mutexes, RWMutexes (readers and
// writers) and MultiMutexes hold a waiter back for d before it takes the
// lock, when the entry whose going made it the head went without its
// holder's release: the holder's session ended (expired, or closed
// without an Unlock) or its entry was deleted by someone else. It is for
// work that no fencing token can stop (an e-mail sent, a payment made by
// a service that takes no token): an old holder that lost its session may
// still be doing it, and d is the time it gets to notice and stop. A
// clean Unlock hands over at once. How a waiter tells a release from a
// loss, and what that costs, is in each store's package documentation
// ("Lock-delay").
//
// The delay is the waiter's own, counted from when it saw the entry go:
// every process that takes the lock should set the same d. It holds back
// the waiters queued when the entry went; a process that enqueues later,
// into a queue already empty, learns of no going and is not held back
// (the store keeps no record of it). An entry that was only waiting, not
// holding, when it went causes no delay. A waiter cancelled while it
// serves a delay returns at once but leaves its entry, held by nobody,
// until the delay's end. Elections and Semaphores ignore it: a leader's
// work is fenced by its term, and a semaphore admits several holders
// anyway. Lease.LockDelay reports the delay served, the acquisition's
// span carries it (distlock.lock_delay), and distlock status shows it
// while it runs. d = 0 (the default) is no delay; d < 0 is an error
// wrapping distlock.ErrInvalidOption.
func WithLockDelay(d time.Duration) Option { return Option{func(o *qlock.Options) { o.LockDelay = d }} }
