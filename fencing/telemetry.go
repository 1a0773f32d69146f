package fencing

import (
	"context"
	"errors"

	"github.com/distlock/distlock"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// Option sets where a fence reports its decisions. Every fence kind
// takes them: NewMemory and Middleware directly, the store fences through
// their WithTelemetry option.
type Option func(*options)

type options struct {
	mp metric.MeterProvider
	tp trace.TracerProvider
}

// WithMeterProvider makes the fence count its decisions through mp
// (distlock.fence.admitted and distlock.fence.refused). Default:
// OpenTelemetry's global provider, which drops them until the
// application installs an SDK.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(o *options) { o.mp = mp } }

// WithTracerProvider makes the fence trace its refusals through tp when
// the refused call's context carries no recording span (with one, the
// refusal is an event on it). Default: OpenTelemetry's global provider.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(o *options) { o.tp = tp } }

// Telemetry counts one fence's decisions and traces its refusals. The
// fence kinds make theirs; a fence written outside this module can make
// one with NewTelemetry and Record each decision.
type Telemetry struct {
	admitted metric.Int64Counter
	refused  metric.Int64Counter
	tracer   trace.Tracer
	base     []attribute.KeyValue
	admitOpt metric.MeasurementOption
	byReason map[string]metric.MeasurementOption
}

// Attribute keys of the fence's metrics and span events.
const (
	attrKind    = attribute.Key("distlock.fence.kind")
	attrLock    = attribute.Key("distlock.lock")
	attrReason  = attribute.Key("reason")
	attrToken   = attribute.Key("distlock.token")
	attrNewest  = attribute.Key("distlock.fence.newest")
	attrMessage = attribute.Key("distlock.fence.error")
)

// NewTelemetry returns the telemetry of a fence of kind ("memory", "etcd",
// "zookeeper", "sql", "http") for the lock called lock ("" when unknown:
// no distlock.lock attribute).
func NewTelemetry(kind, lock string, opts ...Option) *Telemetry {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.mp == nil {
		o.mp = otel.GetMeterProvider()
	}
	if o.tp == nil {
		o.tp = otel.GetTracerProvider()
	}
	const scope = "github.com/distlock/distlock/fencing"
	m := o.mp.Meter(scope)
	t := &Telemetry{tracer: o.tp.Tracer(scope), base: []attribute.KeyValue{attrKind.String(kind)}, byReason: map[string]metric.MeasurementOption{}}
	if lock != "" {
		t.base = append(t.base, attrLock.String(lock))
	}
	var err1, err2 error
	t.admitted, err1 = m.Int64Counter("distlock.fence.admitted", metric.WithUnit("{token}"),
		metric.WithDescription("Tokens a fence admitted (a write it let through)."))
	t.refused, err2 = m.Int64Counter("distlock.fence.refused", metric.WithUnit("{token}"),
		metric.WithDescription("Tokens a fence refused, by reason: stale, fork, foreign, malformed."))
	// A provider that cannot make them must not stop a fence.
	if err1 != nil || t.admitted == nil {
		t.admitted = noop.Int64Counter{}
	}
	if err2 != nil || t.refused == nil {
		t.refused = noop.Int64Counter{}
	}
	t.admitOpt = metric.WithAttributeSet(attribute.NewSet(t.base...))
	for _, r := range []string{"stale", "fork", "foreign", "malformed"} {
		t.byReason[r] = metric.WithAttributeSet(attribute.NewSet(append(t.base[:len(t.base):len(t.base)], attrReason.String(r))...))
	}
	return t
}

// Record counts the fence's decision on tok: admitted when err is nil,
// refused when err is a refusal (Reason names it). A refusal is also an
// event on ctx's span, naming the refused token and the newer one, so that
// a zombie writer shows up in its trace; without a recording span in ctx
// it gets a span of its own. Errors that are no decision (the store could
// not be reached) are not counted.
func (t *Telemetry) Record(ctx context.Context, tok distlock.Token, err error) {
	if t == nil {
		return
	}
	if err == nil {
		t.admitted.Add(ctx, 1, t.admitOpt)
		return
	}
	reason := Reason(err)
	if reason == "" {
		return
	}
	t.refused.Add(ctx, 1, t.byReason[reason])
	attrs := append(t.base[:len(t.base):len(t.base)], attrReason.String(reason), attrToken.String(tok.String()), attrMessage.String(err.Error()))
	if newest, ok := newer(err); ok {
		attrs = append(attrs, attrNewest.String(newest.String()))
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		_, span = t.tracer.Start(ctx, "distlock.fence.refused")
		defer span.End()
	}
	span.AddEvent("distlock.fence.refused", trace.WithAttributes(attrs...))
}

// newer returns the token that made err's fence refuse, if it names one.
func newer(err error) (distlock.Token, bool) {
	var (
		stale *StaleError
		fork  *ForkError
	)
	switch {
	case errors.As(err, &stale):
		return stale.Newest, true
	case errors.As(err, &fork):
		return fork.Admitted, true
	}
	return distlock.Token{}, false
}
