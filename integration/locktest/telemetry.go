package locktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/distlock/distlock"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Observed says where an observed session reports: the providers of the
// real OpenTelemetry SDK, with in-memory readers, and the name normalizer.
type Observed struct {
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	NameNormalizer func(string) string
	// Short asks for a session that lives only seconds without keepalives
	// (a TTL or session timeout of about 3 s), for cases that wait for
	// keepalives and deadlines.
	Short bool
	// Revocable asks for a session whose holders follow revocations
	// (etcdlock and zklock WithRevocable).
	Revocable bool
}

// telemetryCases are the contract's metrics and traces: the same
// instruments, names and attributes on every backend, after scripted
// scenarios.
var telemetryCases = []struct {
	name string
	run  func(t *testing.T, b Backend)
}{
	{"TelemetryHandoff", telemetryHandoff},
	{"TelemetryTryLockAndCancel", telemetryTryAndCancel},
	{"TelemetryLost", telemetryLost},
	{"TelemetryElection", telemetryElection},
	{"TelemetryReadWrite", telemetryReadWrite},
}

// telemetry is one test's SDK: a manual metric reader and a span recorder.
type telemetry struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	obs    Observed
}

func newTelemetry(normalize func(string) string) *telemetry {
	r := sdkmetric.NewManualReader()
	rec := tracetest.NewSpanRecorder()
	return &telemetry{reader: r, spans: rec, obs: Observed{
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
		NameNormalizer: normalize,
	}}
}

// point is one data point: its attributes and its value (a sum's value,
// a gauge's value, or a histogram's count).
type point struct {
	attrs attribute.Set
	value float64
}

// collect returns every data point of metric name.
func (tel *telemetry) collect(t *testing.T, name string) []point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []point
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{dp.Attributes, float64(dp.Value)})
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{dp.Attributes, float64(dp.Value)})
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{dp.Attributes, float64(dp.Count)})
				}
			default:
				t.Fatalf("metric %s: unexpected data %T", name, m.Data)
			}
		}
	}
	return out
}

// value sums the points of metric name whose attributes include want.
func (tel *telemetry) value(t *testing.T, name string, want ...attribute.KeyValue) float64 {
	t.Helper()
	v := 0.0
	for _, p := range tel.collect(t, name) {
		if hasAll(p.attrs, want) {
			v += p.value
		}
	}
	return v
}

func hasAll(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// expect checks metric name's value over the points that have want.
func (tel *telemetry) expect(t *testing.T, name string, v float64, want ...attribute.KeyValue) {
	t.Helper()
	if got := tel.value(t, name, want...); got != v {
		t.Errorf("%s%v = %v, want %v (all points: %v)", name, want, got, v, tel.describe(t, name))
	}
}

func (tel *telemetry) describe(t *testing.T, name string) string {
	var b strings.Builder
	for _, p := range tel.collect(t, name) {
		fmt.Fprintf(&b, "[%s = %v] ", p.attrs.Encoded(attribute.DefaultEncoder()), p.value)
	}
	return b.String()
}

// expectSpans checks that want spans called name have ended.
func (tel *telemetry) expectSpans(t *testing.T, name string, want int) {
	t.Helper()
	if n := len(tel.ended(name)); n != want {
		t.Errorf("%d %s spans, want %d", n, name, want)
	}
}

// ended returns the ended spans called name.
func (tel *telemetry) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tel.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func spanAttr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

var (
	kindMutex    = attribute.String("distlock.kind", "mutex")
	kindElection = attribute.String("distlock.kind", "election")
)

func outcomeIs(o string) attribute.KeyValue { return attribute.String("outcome", o) }

// telemetryHandoff: one holder, one waiter, a handoff. Waiting and held
// counts follow, both waits and the holder's hold are measured, and the
// spans carry the tokens, the queue position and the entries waited on.
// The lock name goes through the normalizer.
func telemetryHandoff(t *testing.T, b Backend) {
	tel := newTelemetry(func(name string) string { return "normalized-" + name[:3] })
	const name = "tel-handoff"
	label := attribute.String("distlock.lock", "normalized-tel")
	s1, s2 := b.ObservedSession(t, tel.obs), b.ObservedSession(t, tel.obs)
	m1, m2 := mutex(t, s1, name), mutex(t, s2, name)

	first := MustLock(t, m1)
	tel.expect(t, "distlock.lock.held", 1, kindMutex, label)
	waiting := LockAsync(Ctx(t), m2)
	b.WaitEntries(t, name, 2)
	tel.expect(t, "distlock.lock.waiting", 1, kindMutex, label)

	MustUnlock(t, first)
	r := <-waiting
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	tel.expect(t, "distlock.lock.waiting", 0, kindMutex, label)
	tel.expect(t, "distlock.lock.held", 1, kindMutex, label)
	tel.expect(t, "distlock.lock.wait.duration", 2, kindMutex, label, outcomeIs("acquired"))
	tel.expect(t, "distlock.lock.hold.duration", 1, kindMutex, label)
	MustUnlock(t, r.Lease)
	tel.expect(t, "distlock.lock.held", 0, kindMutex, label)
	tel.expect(t, "distlock.lock.hold.duration", 2, kindMutex, label)
	tel.expect(t, "distlock.lock.lost", 0)
	for _, p := range tel.collect(t, "distlock.lock.held") {
		if v, _ := p.attrs.Value("distlock.backend"); v.AsString() == "" {
			t.Errorf("a held point without distlock.backend: %v", p.attrs)
		}
	}

	locks := tel.ended("distlock.Lock")
	if len(locks) != 2 {
		t.Fatalf("%d distlock.Lock spans, want 2", len(locks))
	}
	tokens := map[int64]bool{first.Token().Seq: true, r.Lease.Token().Seq: true}
	for _, s := range locks {
		tok, _ := spanAttr(s, "distlock.token")
		if !tokens[tok.AsInt64()] {
			t.Errorf("Lock span token %d, want one of %v", tok.AsInt64(), tokens)
		}
		if o, _ := spanAttr(s, "outcome"); o.AsString() != "acquired" {
			t.Errorf("Lock span outcome %q, want acquired", o.AsString())
		}
		if l, _ := spanAttr(s, "distlock.lock"); l.AsString() != "normalized-tel" {
			t.Errorf("Lock span lock %q, want the normalized name", l.AsString())
		}
		w, _ := spanAttr(s, "distlock.queue.waited_on")
		ahead, _ := spanAttr(s, "distlock.queue.ahead")
		if tok.AsInt64() == r.Lease.Token().Seq {
			// The waiter saw the holder ahead and waited on it — unless
			// (ZooKeeper: create, then list) the holder's release came
			// between its create and its listing, and it found nobody.
			if ahead.AsInt64() != w.AsInt64() || ahead.AsInt64() > 1 {
				t.Errorf("the waiter's span: %d entries ahead at enqueue, waited on %d; want 1 and 1", ahead.AsInt64(), w.AsInt64())
			}
		} else if w.AsInt64() != 0 || ahead.AsInt64() != 0 {
			t.Errorf("the first holder's span: waited on %d, %d ahead; want 0 and 0", w.AsInt64(), ahead.AsInt64())
		}
	}
	tel.expectSpans(t, "distlock.Unlock", 2)
}

// telemetryTryAndCancel: a TryLock that finds the lock held and a Lock
// whose context ends are measured by outcome, and count as waiting only
// while they run.
func telemetryTryAndCancel(t *testing.T, b Backend) {
	tel := newTelemetry(nil)
	const name = "tel-try"
	s1, s2 := b.ObservedSession(t, tel.obs), b.ObservedSession(t, tel.obs)
	m1, m2 := mutex(t, s1, name), mutex(t, s2, name)
	held := MustLock(t, m1)
	defer MustUnlock(t, held)

	if _, err := m2.TryLock(Ctx(t)); !errors.Is(err, distlock.ErrLocked) {
		t.Fatalf("TryLock of a held lock: %v, want ErrLocked", err)
	}
	tel.expect(t, "distlock.lock.wait.duration", 1, kindMutex, outcomeIs("locked"))
	if s := tel.ended("distlock.TryLock"); len(s) != 1 || s[0].Status().Code == codes.Error {
		t.Errorf("TryLock spans %d (want 1), not failed: a held lock is not an error", len(s))
	}

	ctx, cancel := context.WithCancel(Ctx(t))
	waiting := LockAsync(ctx, m2)
	b.WaitEntries(t, name, 2)
	tel.expect(t, "distlock.lock.waiting", 1, kindMutex)
	cancel()
	if r := <-waiting; !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("cancelled Lock: %v, want context.Canceled", r.Err)
	}
	tel.expect(t, "distlock.lock.wait.duration", 1, kindMutex, outcomeIs("cancelled"))
	tel.expect(t, "distlock.lock.waiting", 0, kindMutex)
	tel.expect(t, "distlock.lock.held", 1, kindMutex)
}

// telemetryLost: a held lock whose session ends on the server is counted
// lost, with its reason, and traced as a distlock.lost span.
func telemetryLost(t *testing.T, b Backend) {
	tel := newTelemetry(nil)
	const name = "tel-lost"
	s := b.ObservedSession(t, tel.obs)
	l := MustLock(t, mutex(t, s, name))
	s.End(t)
	select {
	case <-l.Done():
	case <-Ctx(t).Done():
		t.Fatal("the lock was not reported lost")
	}
	// The session's end is noticed either as the session's (its
	// keepalive refused) or as its entry's deletion, whichever comes
	// first; both are honest.
	expired := tel.value(t, "distlock.lock.lost", kindMutex, attribute.String("reason", "session_expired"))
	gone := tel.value(t, "distlock.lock.lost", kindMutex, attribute.String("reason", "entry_gone"))
	if expired+gone != 1 {
		t.Errorf("lost: %v session_expired + %v entry_gone, want 1 in all (points: %s)", expired, gone, tel.describe(t, "distlock.lock.lost"))
	}
	tel.expect(t, "distlock.lock.held", 0, kindMutex)
	tel.expect(t, "distlock.lock.hold.duration", 1, kindMutex)
	spans := tel.ended("distlock.lost")
	if len(spans) != 1 {
		t.Fatalf("%d distlock.lost spans, want 1", len(spans))
	}
	if tok, _ := spanAttr(spans[0], "distlock.token"); tok.AsInt64() != l.Token().Seq {
		t.Errorf("lost span token %d, want %d", tok.AsInt64(), l.Token().Seq)
	}
	if ev := spans[0].Events(); len(ev) != 1 || ev[0].Name != "lock lost" {
		t.Errorf("lost span events %v, want one \"lock lost\" with the cause", ev)
	}
}

// telemetryElection: the leader gauge follows leadership, a candidate that
// wins after waiting counts a failover, and Campaign and Resign are
// traced.
func telemetryElection(t *testing.T, b Backend) {
	tel := newTelemetry(nil)
	const name = "tel-election"
	s1, s2 := b.ObservedSession(t, tel.obs), b.ObservedSession(t, tel.obs)
	e1, e2 := election(t, s1, name), election(t, s2, name)
	l1 := MustCampaign(t, e1, "one")
	tel.expect(t, "distlock.election.leader", 1, kindElection)
	second := CampaignAsync(Ctx(t), e2, "two")
	b.WaitEntries(t, name, 2)
	if err := l1.Resign(Ctx(t)); err != nil {
		t.Fatal(err)
	}
	c := <-second
	if c.Err != nil {
		t.Fatal(c.Err)
	}
	// One process per election in real use; here both candidates share
	// the providers, so the last write (the new leader's 1) stands.
	tel.expect(t, "distlock.election.leader", 1, kindElection)
	// A failover is a campaign that won after waiting on another
	// candidate. The second one nearly always did; it did not when the
	// first resigned between its create and its read of the queue (then
	// it found nobody ahead): its span tells which.
	waited := 0.0
	for _, s := range tel.ended("distlock.Campaign") {
		if w, _ := spanAttr(s, "distlock.queue.waited_on"); w.AsInt64() > 0 {
			waited++
		}
	}
	if waited > 1 {
		t.Errorf("%v campaigns waited, want at most the second", waited)
	}
	tel.expect(t, "distlock.election.failovers", waited, kindElection)
	if err := c.Leadership.Resign(Ctx(t)); err != nil {
		t.Fatal(err)
	}
	tel.expect(t, "distlock.election.leader", 0, kindElection)
	tel.expect(t, "distlock.lock.held", 0, kindElection)
	tel.expectSpans(t, "distlock.Campaign", 2)
	tel.expectSpans(t, "distlock.Resign", 2)
}

// telemetryReadWrite: a readers-writer lock's readers and writers are
// told apart by distlock.kind (read, write), and its spans are RLock and
// Lock.
func telemetryReadWrite(t *testing.T, b Backend) {
	tel := newTelemetry(nil)
	const name = "tel-rw"
	s1, s2 := b.ObservedSession(t, tel.obs), b.ObservedSession(t, tel.obs)
	r1, r2 := rwmutex(t, s1, name), rwmutex(t, s2, name)
	read := attribute.String("distlock.kind", "read")
	write := attribute.String("distlock.kind", "write")
	ra, err := r1.RLock(Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := r2.RLock(Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	tel.expect(t, "distlock.lock.held", 2, read)
	writer := LockAsync(Ctx(t), r1)
	b.WaitEntries(t, name, 3)
	tel.expect(t, "distlock.lock.waiting", 1, write)
	MustUnlock(t, ra)
	MustUnlock(t, rb)
	w := <-writer
	if w.Err != nil {
		t.Fatal(w.Err)
	}
	tel.expect(t, "distlock.lock.held", 0, read)
	tel.expect(t, "distlock.lock.held", 1, write)
	tel.expect(t, "distlock.lock.wait.duration", 1, write, outcomeIs("acquired"))
	MustUnlock(t, w.Lease)
	tel.expectSpans(t, "distlock.RLock", 2)
	tel.expectSpans(t, "distlock.Lock", 1)
}
