package qlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/distlock/distlock"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestSlackRecorded checks that every confirmed keepalive (Extend) records
// the time that was left before the deadline as it stood.
func TestSlackRecorded(t *testing.T) {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	s := NewState(Backend{Name: "etcd", Pkg: "etcdlock"}, slog.New(slog.DiscardHandler), "", 0, time.Now().Add(3*time.Second), Observe{MeterProvider: mp})
	s.Extend(time.Now().Add(5 * time.Second))
	s.Extend(time.Now().Add(6 * time.Second))
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "distlock.session.deadline.slack" {
				continue
			}
			h := m.Data.(metricdata.Histogram[float64])
			if len(h.DataPoints) != 1 {
				t.Fatalf("%d data points, want 1", len(h.DataPoints))
			}
			dp := h.DataPoints[0]
			if dp.Count != 2 {
				t.Errorf("%d slack samples, want 2 (one per Extend)", dp.Count)
			}
			// The first Extend had about 3 s left, the second about 5 s.
			if dp.Sum < 7 || dp.Sum > 8.1 {
				t.Errorf("slack sum %.3f s, want about 8", dp.Sum)
			}
			if v, ok := dp.Attributes.Value("distlock.backend"); !ok || v.AsString() != "etcd" {
				t.Errorf("backend attribute %v, want etcd", v)
			}
			return
		}
	}
	t.Fatal("no distlock.session.deadline.slack recorded")
}

func TestOutcomeAndReason(t *testing.T) {
	wrap := func(err error) error {
		return &distlock.LockError{Name: "x", Op: distlock.OpLock, Err: fmt.Errorf("ctx: %w", err)}
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, OutcomeAcquired},
		{wrap(distlock.ErrLocked), OutcomeLocked},
		{wrap(context.Canceled), OutcomeCancelled},
		{wrap(context.DeadlineExceeded), OutcomeCancelled},
		{wrap(distlock.ErrSessionExpired), OutcomeError},
	} {
		if got := outcome(c.err); got != c.want {
			t.Errorf("outcome(%v) = %s, want %s", c.err, got, c.want)
		}
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{Lost(distlock.ErrSessionExpired), ReasonSessionExpired},
		{Lost(fmt.Errorf("%w: node gone", distlock.ErrEntryGone)), ReasonEntryGone},
		{distlock.ErrSessionClosed, ReasonSessionClosed},
		{errors.New("something else"), ReasonOther},
	} {
		if got := lossReason(c.err); got != c.want {
			t.Errorf("lossReason(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

// BenchmarkTelemetry measures what the instrumentation of one Lock+Unlock
// costs the caller's CPU: begin, enqueued, end, the release span and the
// hold's end, with OpenTelemetry's global providers and no SDK (what
// every user pays) and with the SDK (metrics aggregated by a reader never
// collected, spans sampled and dropped by a no-op exporter).
func BenchmarkTelemetry(b *testing.B) {
	sdk := func() Observe {
		r := sdkmetric.NewManualReader()
		return Observe{
			MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)),
			TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter())),
		}
	}
	for _, c := range []struct {
		name string
		obs  Observe
	}{{"noSDK", Observe{}}, {"SDK", sdk()}} {
		b.Run(c.name, func(b *testing.B) {
			lt := newTelemetry("etcd", c.obs).forLock("bench/lock", "mutex")
			ctx := context.Background()
			n := &Node{Entry: Entry{Kind: Exclusive}, Token: 42}
			b.ReportAllocs()
			for b.Loop() {
				tctx, a := lt.begin(ctx, distlock.OpLock, Exclusive)
				a.enqueued(0, false)
				a.end(n, false, nil)
				_, span := lt.release(tctx, distlock.OpUnlock, Exclusive, n.Token)
				span.End()
				lt.ended(Exclusive, a.start, n.Token, distlock.ErrReleased)
			}
		})
	}
}
