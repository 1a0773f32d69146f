package qlock

import (
	"context"
	"errors"
	"time"

	"github.com/distlock/distlock"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// Observe says where a session reports its metrics and spans. The zero
// value reports to OpenTelemetry's global providers, which drop
// everything until the application installs an SDK.
type Observe struct {
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	// NameNormalizer maps a lock name to the value of the distlock.lock
	// attribute (nil: the name as is). Names can be unbounded (one per
	// tenant, per job): every distinct value is a time series.
	NameNormalizer func(name string) string
}

// instrumentation is the scope name of distlock's meter and tracer.
const instrumentation = "github.com/distlock/distlock"

// Attribute keys, the same on every backend.
const (
	attrBackend = attribute.Key("distlock.backend")
	attrKind    = attribute.Key("distlock.kind")
	attrLock    = attribute.Key("distlock.lock")
	attrOutcome = attribute.Key("outcome")
	attrReason  = attribute.Key("reason")
	attrToken   = attribute.Key("distlock.token")
	attrAhead   = attribute.Key("distlock.queue.ahead")
	attrPartial = attribute.Key("distlock.queue.ahead_partial")
	attrWaited  = attribute.Key("distlock.queue.waited_on")
	attrCause   = attribute.Key("distlock.cause")
	// attrDelay is the lock-delay an acquisition served, in seconds
	// (the distlock.lock_delay event carries it too).
	attrDelay = attribute.Key("distlock.lock_delay")
)

// Wait outcomes (outcome attribute of distlock.lock.wait.duration).
const (
	OutcomeAcquired  = "acquired"  // the lock (or leadership) was taken
	OutcomeLocked    = "locked"    // a TryLock found it held
	OutcomeCancelled = "cancelled" // the caller's context ended first
	OutcomeError     = "error"     // anything else: session ended, store error
)

// Loss reasons (reason attribute of distlock.lock.lost).
const (
	ReasonSessionExpired = "session_expired"
	ReasonEntryGone      = "entry_gone"
	ReasonSessionClosed  = "session_closed"
	ReasonOther          = "other"
)

// telemetry is a session's instruments, made once from its providers.
// With the global providers and no SDK they do nothing, cheaply: the
// attribute sets are built once per lock handle (see lockTel).
type telemetry struct {
	backend   string
	normalize func(string) string
	tracer    trace.Tracer
	wait      metric.Float64Histogram
	hold      metric.Float64Histogram
	held      metric.Int64UpDownCounter
	waiting   metric.Int64UpDownCounter
	lost      metric.Int64Counter
	slack     metric.Float64Histogram
	leader    metric.Int64Gauge
	failovers metric.Int64Counter
	slackAttr metric.MeasurementOption
}

// newTelemetry makes the instruments of a session of backend ("etcd",
// "zookeeper"). An instrument the provider cannot make is replaced by a
// no-op one, so telemetry never stops a lock.
func newTelemetry(backend string, o Observe) *telemetry {
	mp, tp := o.MeterProvider, o.TracerProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	m := mp.Meter(instrumentation)
	t := &telemetry{backend: backend, normalize: o.NameNormalizer, tracer: tp.Tracer(instrumentation)}
	// Waits and holds span milliseconds to hours; the default buckets
	// (0–10,000) would put them all in one.
	secs := metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
	t.wait = or[metric.Float64Histogram](noop.Float64Histogram{})(m.Float64Histogram("distlock.lock.wait.duration", metric.WithUnit("s"), secs,
		metric.WithDescription("Time from a Lock, RLock, TryLock or Campaign call to its return, by outcome.")))
	t.hold = or[metric.Float64Histogram](noop.Float64Histogram{})(m.Float64Histogram("distlock.lock.hold.duration", metric.WithUnit("s"), secs,
		metric.WithDescription("Time a lock (or leadership) was held, ended by its release or its loss.")))
	t.held = or[metric.Int64UpDownCounter](noop.Int64UpDownCounter{})(m.Int64UpDownCounter("distlock.lock.held", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks (and leaderships) held now.")))
	t.waiting = or[metric.Int64UpDownCounter](noop.Int64UpDownCounter{})(m.Int64UpDownCounter("distlock.lock.waiting", metric.WithUnit("{call}"),
		metric.WithDescription("Lock, RLock, TryLock and Campaign calls in progress.")))
	t.lost = or[metric.Int64Counter](noop.Int64Counter{})(m.Int64Counter("distlock.lock.lost", metric.WithUnit("{lock}"),
		metric.WithDescription("Held locks (and leaderships) lost before their release, by reason.")))
	t.slack = or[metric.Float64Histogram](noop.Float64Histogram{})(m.Float64Histogram("distlock.session.deadline.slack", metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60),
		metric.WithDescription("Time left before the session's client-side deadline when a keepalive was confirmed: the early warning of pauses and slow networks that precede a lost lock.")))
	t.leader = or[metric.Int64Gauge](noop.Int64Gauge{})(m.Int64Gauge("distlock.election.leader", metric.WithUnit("{leader}"),
		metric.WithDescription("1 while this process leads the election, 0 once it no longer does.")))
	t.failovers = or[metric.Int64Counter](noop.Int64Counter{})(m.Int64Counter("distlock.election.failovers", metric.WithUnit("{failover}"),
		metric.WithDescription("Campaigns of this process that won after waiting behind another leader.")))
	t.slackAttr = metric.WithAttributeSet(attribute.NewSet(attrBackend.String(backend)))
	return t
}

// confirmed records the slack of a confirmed keepalive: the time that was
// left before the deadline as it stood (was).
func (t *telemetry) confirmed(was time.Time) {
	t.slack.Record(context.Background(), time.Until(was).Seconds(), t.slackAttr)
}

// lockTel is one lock handle's attributes, built once.
type lockTel struct {
	t     *telemetry
	kinds map[Kind]lockAttrs
}

// lockAttrs are the measurement options for one kind of entry of a lock.
type lockAttrs struct {
	kind  string
	kvs   []attribute.KeyValue // backend, kind, lock, for spans (not to be modified)
	attrs metric.MeasurementOption
	byOut map[string]metric.MeasurementOption
	lost  map[string]metric.MeasurementOption // by reason
}

// forLock builds the attribute sets of lock name, whose recipe is what
// ("mutex", "rwmutex", "election", "semaphore").
func (t *telemetry) forLock(name, what string) *lockTel {
	label := name
	if t.normalize != nil {
		label = t.normalize(name)
	}
	lt := &lockTel{t: t, kinds: map[Kind]lockAttrs{}}
	add := func(k Kind, kind string) {
		base := attribute.NewSet(attrBackend.String(t.backend), attrKind.String(kind), attrLock.String(label))
		la := lockAttrs{kind: kind, kvs: base.ToSlice(), attrs: metric.WithAttributeSet(base),
			byOut: map[string]metric.MeasurementOption{}, lost: map[string]metric.MeasurementOption{}}
		for _, o := range []string{OutcomeAcquired, OutcomeLocked, OutcomeCancelled, OutcomeError} {
			la.byOut[o] = metric.WithAttributeSet(attribute.NewSet(append(base.ToSlice(), attrOutcome.String(o))...))
		}
		for _, r := range []string{ReasonSessionExpired, ReasonEntryGone, ReasonSessionClosed, ReasonOther} {
			la.lost[r] = metric.WithAttributeSet(attribute.NewSet(append(base.ToSlice(), attrReason.String(r))...))
		}
		lt.kinds[k] = la
	}
	switch what {
	case "mutex":
		add(Exclusive, "mutex")
	case "rwmutex":
		add(Exclusive, "write")
		add(Shared, "read")
	case "election":
		add(Candidate, "election")
	default:
		// A recipe not named above (the semaphore) is its own kind,
		// whatever its entries are.
		for _, k := range []Kind{Exclusive, Shared, Candidate, Counted} {
			add(k, what)
		}
	}
	return lt
}

// spanName is the span of an operation: the method users called (a
// semaphore's Acquire and TryAcquire show as distlock.Lock).
func spanName(op distlock.Op, k Kind) string {
	switch {
	case op == distlock.OpTryLock && k == Shared:
		return "distlock.TryRLock"
	case op == distlock.OpTryLock:
		return "distlock.TryLock"
	case op == distlock.OpCampaign:
		return "distlock.Campaign"
	case k == Shared:
		return "distlock.RLock"
	default:
		return "distlock.Lock"
	}
}

// acquisition follows one Lock, RLock, TryLock, Campaign or Acquire call
// (lock.takeWith).
type acquisition struct {
	lt    *lockTel
	la    lockAttrs
	ctx   context.Context
	span  trace.Span
	start time.Time
	// waitedOn counts the entries the call waited on, one at a time.
	waitedOn int
}

// queueStats is what an acquisition saw of its queue on the way, as the
// engine returns it (on failure too) for the call to record: the engine
// records nothing itself.
type queueStats struct {
	// enqueued says the entry was made (or a permit claimed at once):
	// ahead and partial are known.
	enqueued bool
	// ahead is how many conflicting entries the entry's view showed ahead
	// of it; partial says the view was bounded (more may have been).
	ahead   int
	partial bool
	// waitedOn counts the waits, one entry (or, for a semaphore's line
	// head, one slot) at a time.
	waitedOn int
	// delayed is how long lock-delay held the acquisition back.
	delayed time.Duration
}

// begin starts following a call: the waiting count and its span. The
// returned context carries the span, so that store requests made under it
// can be traced as its children.
func (lt *lockTel) begin(ctx context.Context, op distlock.Op, k Kind) (context.Context, *acquisition) {
	la := lt.kinds[k]
	// Attributes go on only where a span records: without an SDK, a call
	// costs no allocation for them.
	ctx, span := lt.t.tracer.Start(ctx, spanName(op, k), trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(la.kvs...)
	}
	lt.t.waiting.Add(ctx, 1, la.attrs)
	return ctx, &acquisition{lt: lt, la: la, ctx: ctx, span: span, start: time.Now()}
}

// enqueued records where the entry landed: how many entries the view
// shows ahead of it, and whether the view was bounded (more may be).
func (a *acquisition) enqueued(ahead int, partial bool) {
	if a.span.IsRecording() {
		a.span.SetAttributes(attrAhead.Int(ahead), attrPartial.Bool(partial))
	}
}

// saw records what the call saw of its queue, before end.
func (a *acquisition) saw(qs queueStats) {
	if qs.enqueued {
		a.enqueued(qs.ahead, qs.partial)
	}
	a.waitedOn = qs.waitedOn
	if qs.delayed > 0 && a.span.IsRecording() {
		// The entry ahead went without its holder's release: the wait
		// includes the lock-delay, which the trace shows apart.
		a.span.SetAttributes(attrDelay.Float64(qs.delayed.Seconds()))
		a.span.AddEvent("distlock.lock_delay", trace.WithAttributes(attrDelay.Float64(qs.delayed.Seconds())))
	}
}

// end records the call's outcome; n is the entry that holds, on success,
// and cancelled says whether the caller's context had ended.
func (a *acquisition) end(n *Node, cancelled bool, err error) {
	out := outcome(err)
	if err != nil && cancelled {
		out = OutcomeCancelled
	}
	a.lt.t.waiting.Add(a.ctx, -1, a.la.attrs)
	a.lt.t.wait.Record(a.ctx, time.Since(a.start).Seconds(), a.la.byOut[out])
	if a.span.IsRecording() {
		a.span.SetAttributes(attrOutcome.String(out), attrWaited.Int(a.waitedOn))
		if n != nil {
			a.span.SetAttributes(attrToken.Int64(n.Token))
		}
	}
	if out == OutcomeError {
		endSpan(a.span, err)
	}
	a.span.End()
	if n != nil {
		a.lt.t.held.Add(a.ctx, 1, a.la.attrs)
		if a.la.kind == "election" {
			a.lt.t.leader.Record(a.ctx, 1, a.la.attrs)
			if a.waitedOn > 0 {
				a.lt.t.failovers.Add(a.ctx, 1, a.la.attrs)
			}
		}
	}
}

// ended records the end of a hold that began at start: a release, or a
// loss with cause.
func (lt *lockTel) ended(k Kind, start time.Time, token int64, cause error) {
	la := lt.kinds[k]
	ctx := context.Background()
	lt.t.hold.Record(ctx, time.Since(start).Seconds(), la.attrs)
	lt.t.held.Add(ctx, -1, la.attrs)
	if la.kind == "election" {
		lt.t.leader.Record(ctx, 0, la.attrs)
	}
	if errors.Is(cause, distlock.ErrReleased) {
		return
	}
	reason := lossReason(cause)
	lt.t.lost.Add(ctx, 1, la.lost[reason])
	// A loss has no call of its own to hang a span on: it gets a span
	// that says so, with the cause as an event, so that it shows up in a
	// trace search for the lock.
	_, span := lt.t.tracer.Start(ctx, "distlock.lost")
	if span.IsRecording() {
		span.SetAttributes(la.kvs...)
		span.SetAttributes(attrToken.Int64(token), attrReason.String(reason))
		span.AddEvent("lock lost", trace.WithAttributes(attrCause.String(cause.Error())))
	}
	span.End()
}

// release traces an Unlock or Resign.
func (lt *lockTel) release(ctx context.Context, op distlock.Op, k Kind, token int64) (context.Context, trace.Span) {
	name := "distlock.Unlock"
	if op == distlock.OpResign {
		name = "distlock.Resign"
	}
	ctx, span := lt.t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(lt.kinds[k].kvs...)
		span.SetAttributes(attrToken.Int64(token))
	}
	return ctx, span
}

// outcome classifies an acquisition's error.
func outcome(err error) string {
	switch {
	case err == nil:
		return OutcomeAcquired
	case errors.Is(err, distlock.ErrLocked):
		return OutcomeLocked
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return OutcomeCancelled
	default:
		return OutcomeError
	}
}

// lossReason classifies why a held entry was lost.
func lossReason(cause error) string {
	switch {
	case errors.Is(cause, distlock.ErrSessionExpired):
		return ReasonSessionExpired
	case errors.Is(cause, distlock.ErrEntryGone):
		return ReasonEntryGone
	case errors.Is(cause, distlock.ErrSessionClosed):
		return ReasonSessionClosed
	default:
		return ReasonOther
	}
}

// endSpan marks span failed with err, if any (it does not end it).
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}

// or returns a function that passes an instrument on, or fallback when
// the provider could not make it (an error, or nil from a provider that
// does not follow the API's rule of returning a usable instrument).
func or[T any](fallback T) func(v T, err error) T {
	return func(v T, err error) T {
		if err != nil || any(v) == nil {
			return fallback
		}
		return v
	}
}
