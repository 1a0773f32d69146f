package fencing_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// admitOnly hides Memory's Do, to exercise Middleware's two-step path.
type admitOnly struct{ f fencing.Fence }

func (a admitOnly) Admit(ctx context.Context, t distlock.Token) error { return a.f.Admit(ctx, t) }

// failing is a fence whose store cannot be reached.
type failing struct{}

func (failing) Admit(context.Context, distlock.Token) error { return errors.New("store unreachable") }

func TestMiddleware(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(*fencing.Memory) fencing.Fence
	}{
		{"Doer", func(m *fencing.Memory) fencing.Fence { return m }},
		{"AdmitOnly", func(m *fencing.Memory) fencing.Fence { return admitOnly{m} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := fencing.NewMemory("ledger")
			var mu sync.Mutex
			var ledger []distlock.Token
			srv := httptest.NewServer(fencing.Middleware(tc.wrap(m), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tok, ok := fencing.FromContext(r.Context())
				if !ok {
					t.Error("no token in the handler's context")
				}
				mu.Lock()
				ledger = append(ledger, tok)
				mu.Unlock()
				w.WriteHeader(http.StatusNoContent)
			})))
			defer srv.Close()

			post := func(header ...string) *http.Response {
				t.Helper()
				req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("entry"))
				for _, h := range header {
					req.Header.Add(fencing.Header, h)
				}
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { resp.Body.Close() })
				return resp
			}
			write := func(seq int64, owner ...uint64) error {
				req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
				tok := distlock.Token{Name: "ledger", Seq: seq, Owner: 0xa1}
				if len(owner) > 0 {
					tok.Owner = owner[0]
				}
				fencing.SetToken(req.Header, tok)
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				return fencing.ResponseError("ledger service", resp)
			}
			for _, s := range []int64{10, 12, 12} {
				if err := write(s); err != nil {
					t.Fatalf("write %d: %v", s, err)
				}
			}
			err := write(11)
			var stale *fencing.StaleError
			if !errors.As(err, &stale) || !errors.Is(err, fencing.ErrStale) || stale.Newest.Seq != 12 || stale.Token.Seq != 11 {
				t.Fatalf("stale write: %v, want a *StaleError 11 < 12", err)
			}
			// Another acquisition with the admitted sequence number.
			err = write(12, 0xb2)
			var fork *fencing.ForkError
			if !errors.As(err, &fork) || !errors.Is(err, fencing.ErrFork) || fork.Token.Owner != 0xb2 || fork.Admitted.Owner != 0xa1 || fork.Admitted.Seq != 12 {
				t.Fatalf("forked write: %v, want a *ForkError naming ledger@12.b2 and ledger@12.a1", err)
			}
			if fencing.Reason(err) != "fork" {
				t.Errorf("Reason(%v) = %q, want fork", err, fencing.Reason(err))
			}
			for _, c := range []struct {
				header []string
				code   int
				body   string
			}{
				{nil, http.StatusBadRequest, "no Fencing-Token header"},
				{[]string{"ledger@x"}, http.StatusBadRequest, "invalid fencing token"},
				{[]string{"ledger@13"}, http.StatusBadRequest, "no owner"}, // the form before owners
				{[]string{"ledger@13.a1", "ledger@14.a1"}, http.StatusBadRequest, "2 Fencing-Token headers"},
				{[]string{"other@99.1"}, http.StatusConflict, "another lock"},
				{[]string{"ledger@5.a1"}, http.StatusConflict, "ledger@12.a1 was admitted already"},
				{[]string{"ledger@12.c3"}, http.StatusConflict, "ledger@12.a1 was admitted already, with the same sequence number and another owner"},
			} {
				resp := post(c.header...)
				if resp.StatusCode != c.code {
					t.Errorf("headers %q: status %d, want %d", c.header, resp.StatusCode, c.code)
				}
				if err := fencing.ResponseError("ledger service", resp); err == nil || !strings.Contains(err.Error(), c.body) {
					t.Errorf("headers %q: %v, want it to say %q", c.header, err, c.body)
				}
			}
			if len(ledger) != 3 || ledger[2].Seq != 12 {
				t.Fatalf("ledger %v, want the three admitted writes", ledger)
			}
		})
	}

	t.Run("StoreDown", func(t *testing.T) {
		srv := httptest.NewServer(fencing.Middleware(failing{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t.Error("handler ran although the fence failed")
		})))
		defer srv.Close()
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		fencing.SetToken(req.Header, distlock.Token{Name: "ledger", Seq: 1, Owner: 1})
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("status %d, want 503", resp.StatusCode)
		}
	})
}

// TestMiddlewareTelemetry: a request turned away before the fence is
// asked (no token, a token text that does not parse) is counted by the
// middleware as refused, kind "http", reason "malformed"; the decisions
// the fence makes are the fence's to count.
func TestMiddlewareTelemetry(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m, _ := fencing.NewMemory("ledger", fencing.WithMeterProvider(mp))
	srv := httptest.NewServer(fencing.Middleware(m, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), fencing.WithMeterProvider(mp)))
	defer srv.Close()
	for _, tok := range []string{"", "not a token", distlock.Token{Name: "ledger", Seq: 3, Owner: 1}.String()} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		if tok != "" {
			req.Header.Set(fencing.Header, tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			for _, dp := range mt.Data.(metricdata.Sum[int64]).DataPoints {
				kind, _ := dp.Attributes.Value("distlock.fence.kind")
				reason, _ := dp.Attributes.Value("reason")
				got[mt.Name+"/"+kind.AsString()+"/"+reason.AsString()] += dp.Value
			}
		}
	}
	want := map[string]int64{"distlock.fence.refused/http/malformed": 2, "distlock.fence.admitted/memory/": 1}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
}
