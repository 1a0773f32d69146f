package qlock

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestOwedDelay: the going that counts for lock-delay is that of an entry
// that held when it went (see owedDelay), as a waiter's walk from entry
// to entry, newest to oldest, shows it.
func TestOwedDelay(t *testing.T) {
	w := func(key string) Entry { return Entry{Key: key, Kind: Exclusive} }
	r := func(key string) Entry { return Entry{Key: key, Kind: Shared} }
	type step struct {
		e        Entry
		released bool
	}
	cases := []struct {
		name  string
		steps []step
		due   bool
	}{
		{"holder released", []step{{w("h"), true}}, false},
		{"holder's session ended", []step{{w("h"), false}}, true},
		{"waiter ahead ended, then holder released", []step{{w("p"), false}, {w("h"), true}}, false},
		{"waiter ahead gave up (counted released), then holder ended", []step{{w("p"), true}, {w("h"), false}}, true},
		{"writer behind readers: one ended, the older released", []step{{r("r2"), false}, {r("r1"), true}}, true},
		{"writer behind readers: both released", []step{{r("r2"), true}, {r("r1"), true}}, false},
		{"reader ended while waiting for an older writer that released", []step{{r("r2"), false}, {w("x"), true}}, false},
		{"writer ended while waiting for an older reader that released", []step{{w("x"), false}, {r("r1"), true}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var o owedDelay
			for _, s := range c.steps {
				o.waitOn(s.e)
				o.went(s.e, s.released, time.Now())
			}
			if o.due != c.due {
				t.Fatalf("due = %v, want %v (%+v)", o.due, c.due, o)
			}
		})
	}
}

// TestLockDelaySpan: an acquisition held back by lock-delay says so on its
// span, as an attribute and an event; one that was not, neither.
func TestLockDelaySpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	lt := newTelemetry("zookeeper", Observe{TracerProvider: tp}).forLock("mail", "mutex")
	for _, delayed := range []time.Duration{0, 3 * time.Second} {
		_, a := lt.begin(context.Background(), distlock.OpLock, Exclusive)
		a.saw(queueStats{enqueued: true, ahead: 1, waitedOn: 1, delayed: delayed})
		a.end(&Node{Token: 9}, false, nil)
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	for i, want := range []float64{0, 3} {
		var got float64
		for _, kv := range spans[i].Attributes() {
			if kv.Key == attrDelay {
				got = kv.Value.AsFloat64()
			}
		}
		events := 0
		for _, ev := range spans[i].Events() {
			if ev.Name == "distlock.lock_delay" {
				events++
			}
		}
		if got != want || (events == 1) != (want > 0) {
			t.Errorf("span %d: distlock.lock_delay %v and %d events, want %v", i, got, events, want)
		}
	}
}
