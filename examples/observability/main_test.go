package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetricsServed runs the example and scrapes /metrics over HTTP, as
// Prometheus would, once the workers are done: every acquisition was
// measured, the revoked holder's loss counted, and nothing is left held
// or waiting.
func TestMetricsServed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan struct{})
	ran := make(chan error, 1)
	go func() { ran <- run(ctx, ln, io.Discard, done, nil) }()
	select {
	case <-done:
	case err := <-ran:
		t.Fatalf("run returned before its workers were done: %v", err)
	}

	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string, labels map[string]string) (float64, bool) {
		f, ok := families[name]
		if !ok {
			return 0, false
		}
		total, found := 0.0, false
		for _, m := range f.Metric {
			if !hasLabels(m, labels) {
				continue
			}
			found = true
			switch {
			case m.Counter != nil:
				total += m.Counter.GetValue()
			case m.Gauge != nil:
				total += m.Gauge.GetValue()
			case m.Histogram != nil:
				total += float64(m.Histogram.GetSampleCount())
			}
		}
		return total, found
	}
	lock := map[string]string{"distlock_backend": "etcd", "distlock_kind": "mutex", "distlock_lock": "reports/daily"}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for a, b := range lock {
			m[a] = b
		}
		return m
	}
	// Worker 0 lost the lock on its third acquisition; the others
	// acquired rounds times each.
	acquired := float64((rounds/2 + 1) + (workers-1)*rounds)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"distlock_lock_wait_duration_seconds", with("outcome", "acquired"), acquired},
		{"distlock_lock_hold_duration_seconds", lock, acquired},
		{"distlock_lock_held", lock, 0},
		{"distlock_lock_waiting", lock, 0},
		{"distlock_lock_lost_total", lock, 1},
	} {
		got, ok := value(c.name, c.labels)
		if !ok {
			t.Errorf("no %s%v in the scrape", c.name, c.labels)
			continue
		}
		if got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	cancel()
	<-ran
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	have := map[string]string{}
	for _, l := range m.Label {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
