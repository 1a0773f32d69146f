package locktest

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// keepaliveProbe is a MeterProvider that drops every measurement but the
// session's deadline slack, which it turns into a signal on ch: an event
// for each confirmed keepalive, for tests that wait for one.
type keepaliveProbe struct {
	noop.MeterProvider
	ch chan struct{}
}

func newKeepaliveProbe() *keepaliveProbe { return &keepaliveProbe{ch: make(chan struct{}, 1)} }

func (p *keepaliveProbe) Meter(string, ...metric.MeterOption) metric.Meter {
	return probeMeter{ch: p.ch}
}

type probeMeter struct {
	noop.Meter
	ch chan struct{}
}

func (m probeMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	if name == "distlock.session.deadline.slack" {
		return probeHistogram{ch: m.ch}, nil
	}
	return m.Meter.Float64Histogram(name, opts...)
}

type probeHistogram struct {
	noop.Float64Histogram
	ch chan struct{}
}

func (h probeHistogram) Record(context.Context, float64, ...metric.RecordOption) {
	select {
	case h.ch <- struct{}{}:
	default:
	}
}

// leaseDeadline: a held lock's Deadline lies ahead and moves on with each
// confirmed keepalive; once nothing can confirm the session any more (its
// client closed under it), Done closes no later than the deadline, and
// Deadline is then the zero Time.
func leaseDeadline(t *testing.T, b Backend) {
	probe := newKeepaliveProbe()
	s := b.ObservedSession(t, Observed{MeterProvider: probe, Short: true})
	l := MustLock(t, mutex(t, s, "lease-deadline"))
	d0 := l.Deadline()
	if !d0.After(time.Now()) {
		t.Fatalf("a held lock's deadline %v is not ahead", d0)
	}
	// Conservative: never past what the server grants (3 s from a
	// keepalive sent before now).
	if ahead := time.Until(d0); ahead > 3*time.Second {
		t.Fatalf("a held lock's deadline is %v ahead, more than the session's 3 s", ahead)
	}
	// Two confirmations after d0 was read: the first may have been on its
	// way already.
	for range 2 {
		select {
		case <-probe.ch:
		case <-Ctx(t).Done():
			t.Fatal("no keepalive confirmed")
		}
	}
	if d1 := l.Deadline(); !d1.After(d0) {
		t.Fatalf("the deadline did not move on with the keepalives: %v, then %v", d0, d1)
	}

	s.Cut(t)
	last := l.Deadline() // no confirmation can come after the client closed
	select {
	case <-l.Done():
	case <-Ctx(t).Done():
		t.Fatal("the lock outlived its session's deadline")
	}
	// Done may close earlier (the client's closing can end the session
	// or the entry's watch first), never later; a second covers the
	// timers of a loaded machine.
	if late := time.Since(last); !last.IsZero() && late > time.Second {
		t.Errorf("Done closed %v after the deadline %v", late.Round(time.Millisecond), last)
	}
	t.Logf("Done closed %v before the deadline: %v", time.Until(last).Round(time.Millisecond), l.Err())
	if d := l.Deadline(); !d.IsZero() {
		t.Errorf("Deadline after Done: %v, want the zero Time", d)
	}
}
