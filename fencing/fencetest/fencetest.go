// Package fencetest is the contract every fencing backend meets, as one
// suite run against real stores: the same acquisition's token admitted
// again, older ones refused with the newer one named, a token with the
// admitted sequence number and another owner (a fork: a rebuilt or
// restored cluster issued the number twice) refused with both named,
// foreign and invalid tokens refused, fences of different resources
// independent, and under concurrency no token refused unless a newer one
// (or a fork of it) was admitted.
package fencetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// NewFence returns a fresh fence (never used before) for a resource
// guarded by lock, reporting its decisions as opts say. Fences returned
// for different resources must not share state; resource is unique per
// call within a test.
type NewFence func(t *testing.T, resource, lock string, opts ...fencing.Option) fencing.Fence

// Ctx returns a context that ends with the test or after a minute.
func Ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Owner is the owner of the tokens Tok makes.
const Owner uint64 = 0x694d7f0c8a1b2c3d

// Tok returns the token of lock "ledger" with sequence number seq, owned
// by Owner.
func Tok(seq int64) distlock.Token { return distlock.Token{Name: "ledger", Seq: seq, Owner: Owner} }

// Run runs the contract against fences made by newFence.
func Run(t *testing.T, newFence NewFence) {
	n := 0
	fresh := func(t *testing.T, lock string) fencing.Fence {
		n++
		return newFence(t, t.Name()+"-"+string(rune('a'+n%26)), lock)
	}
	tok := Tok

	t.Run("Rule", func(t *testing.T) {
		f := fresh(t, "ledger")
		ctx := Ctx(t)
		for _, s := range []int64{5, 5, 7} {
			if err := f.Admit(ctx, tok(s)); err != nil {
				t.Fatalf("admit %d: %v", s, err)
			}
		}
		err := f.Admit(ctx, tok(6))
		var stale *fencing.StaleError
		if !errors.Is(err, fencing.ErrStale) || !errors.As(err, &stale) || fencing.Reason(err) != "stale" {
			t.Fatalf("admit 6 after 7: %v, want a *StaleError", err)
		}
		if stale.Token != tok(6) || stale.Newest != tok(7) {
			t.Fatalf("stale error names %v and %v, want %v and %v", stale.Token, stale.Newest, tok(6), tok(7))
		}
		if err := f.Admit(ctx, tok(7)); err != nil {
			t.Fatalf("admit 7 again: %v", err)
		}
		if err := f.Admit(ctx, tok(1<<62)); err != nil {
			t.Fatalf("admit a large token: %v", err)
		}
	})

	t.Run("ForeignAndInvalid", func(t *testing.T) {
		f := fresh(t, "ledger")
		ctx := Ctx(t)
		if err := f.Admit(ctx, distlock.Token{Name: "other", Seq: 9, Owner: Owner}); !errors.Is(err, fencing.ErrForeignToken) || fencing.Reason(err) != "foreign" {
			t.Errorf("token of another lock: %v, want ErrForeignToken", err)
		}
		for _, bad := range []distlock.Token{{}, {Name: "ledger"}, {Name: "ledger", Seq: -3, Owner: Owner}, {Name: "led ger", Seq: 3, Owner: Owner},
			{Name: "ledger", Seq: 3}, // no owner: a token of the form before owners, or hand-made
		} {
			if err := f.Admit(ctx, bad); !errors.Is(err, distlock.ErrInvalidToken) {
				t.Errorf("token %#v: %v, want ErrInvalidToken", bad, err)
			}
		}
		// None of those counted: a small valid token is still admitted.
		if err := f.Admit(ctx, tok(1)); err != nil {
			t.Fatalf("admit 1 after refusals: %v", err)
		}
	})

	t.Run("Fork", func(t *testing.T) {
		f := fresh(t, "ledger")
		ctx := Ctx(t)
		a := tok(5)
		b := distlock.Token{Name: "ledger", Seq: 5, Owner: Owner + 1} // another session, same number
		for _, x := range []distlock.Token{a, a} {
			if err := f.Admit(ctx, x); err != nil {
				t.Fatalf("admit %v: %v", x, err)
			}
		}
		err := f.Admit(ctx, b)
		var fork *fencing.ForkError
		if !errors.Is(err, fencing.ErrFork) || !errors.Is(err, distlock.ErrTokenFork) || !errors.As(err, &fork) {
			t.Fatalf("admit %v after %v: %v, want a *ForkError", b, a, err)
		}
		if fork.Token != b || fork.Admitted != a {
			t.Fatalf("fork error names %v and %v, want %v and %v", fork.Token, fork.Admitted, b, a)
		}
		if msg := err.Error(); !strings.Contains(msg, a.String()) || !strings.Contains(msg, b.String()) {
			t.Errorf("fork error %q does not name both tokens", msg)
		}
		if errors.Is(err, fencing.ErrStale) || fencing.Reason(err) != "fork" {
			t.Errorf("fork error %v: reason %q, want only fork", err, fencing.Reason(err))
		}
		// The refusal changed nothing: the first acquisition is still
		// admitted, the second still refused.
		if err := f.Admit(ctx, a); err != nil {
			t.Fatalf("admit %v again after the fork: %v", a, err)
		}
		if err := f.Admit(ctx, b); !errors.Is(err, fencing.ErrFork) {
			t.Fatalf("admit %v again: %v, want ErrFork", b, err)
		}
		// A newer token of either owner moves the fence on; then the fork
		// is refused the other way round, and older ones are stale.
		b6 := distlock.Token{Name: "ledger", Seq: 6, Owner: b.Owner}
		if err := f.Admit(ctx, b6); err != nil {
			t.Fatalf("admit %v: %v", b6, err)
		}
		if err := f.Admit(ctx, tok(6)); !errors.As(err, &fork) || fork.Admitted != b6 {
			t.Fatalf("admit %v after %v: %v, want a *ForkError", tok(6), b6, err)
		}
		var stale *fencing.StaleError
		for _, x := range []distlock.Token{a, b} {
			if err := f.Admit(ctx, x); !errors.As(err, &stale) || stale.Newest != b6 {
				t.Fatalf("admit %v after %v: %v, want a *StaleError", x, b6, err)
			}
		}
	})

	t.Run("ForkConcurrent", func(t *testing.T) {
		// Sessions of a forked history race with one sequence number: the
		// fence admits exactly one owner's token (as often as it comes)
		// and refuses every other one as a fork.
		f := fresh(t, "ledger")
		ctx := Ctx(t)
		const workers, each = 6, 4
		var (
			mu       sync.Mutex
			admitted = map[uint64]int{}
			wg       sync.WaitGroup
		)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				x := distlock.Token{Name: "ledger", Seq: 7, Owner: Owner + uint64(w)}
				for range each {
					err := f.Admit(ctx, x)
					var fork *fencing.ForkError
					switch {
					case err == nil:
						mu.Lock()
						admitted[x.Owner]++
						mu.Unlock()
					case errors.As(err, &fork):
						if fork.Admitted.Seq != 7 || fork.Admitted.Owner == x.Owner || fork.Token != x {
							t.Errorf("admit %v: fork error names %v and %v", x, fork.Token, fork.Admitted)
						}
					default:
						t.Errorf("admit %v: %v", x, err)
					}
				}
			}()
		}
		wg.Wait()
		if len(admitted) != 1 {
			t.Fatalf("owners admitted with sequence number 7: %v, want exactly one", admitted)
		}
		for o, n := range admitted {
			if n != each {
				t.Errorf("owner %x admitted %d of %d times: a retry of the admitted acquisition must be admitted", o, n, each)
			}
		}
	})

	t.Run("ResourcesIndependent", func(t *testing.T) {
		ctx := Ctx(t)
		a, b := fresh(t, "ledger"), fresh(t, "ledger")
		c := fresh(t, "ledger/eu") // a lock whose name extends another's
		if err := a.Admit(ctx, tok(100)); err != nil {
			t.Fatal(err)
		}
		if err := b.Admit(ctx, tok(3)); err != nil {
			t.Fatalf("another resource's fence saw the first one's token: %v", err)
		}
		if err := c.Admit(ctx, distlock.Token{Name: "ledger/eu", Seq: 2, Owner: Owner}); err != nil {
			t.Fatalf("lock ledger/eu: %v", err)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		f := fresh(t, "ledger")
		ctx := Ctx(t)
		const workers, each = 6, 15
		Race(t, workers, each, Shuffled(workers, each), func(_ int, seq int64) error { return f.Admit(ctx, tok(seq)) })
		// Nothing below the newest is admitted any more.
		var stale *fencing.StaleError
		if err := f.Admit(ctx, tok(int64(workers*each-1))); !errors.As(err, &stale) || stale.Newest != tok(int64(workers*each)) {
			t.Errorf("after the race, admit %d: %v", workers*each-1, err)
		}
	})

	t.Run("Telemetry", func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		n++
		f := newFence(t, t.Name()+"-"+string(rune('a'+n%26)), "ledger",
			fencing.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))), fencing.WithTracerProvider(tp))
		ctx := Ctx(t)
		for _, s := range []int64{5, 5, 7} {
			if err := f.Admit(ctx, tok(s)); err != nil {
				t.Fatalf("admit %d: %v", s, err)
			}
		}
		// A stale write inside the writer's own span: the refusal is an
		// event on it, naming both tokens.
		wctx, writer := tp.Tracer("test").Start(ctx, "zombie write")
		if err := f.Admit(wctx, tok(6)); !errors.Is(err, fencing.ErrStale) {
			t.Fatalf("admit 6 after 7: %v, want stale", err)
		}
		writer.End()
		fork := tok(7)
		fork.Owner++
		foreign := distlock.Token{Name: "other", Seq: 9, Owner: Owner}
		for _, c := range []struct {
			t    distlock.Token
			want error
		}{{fork, fencing.ErrFork}, {foreign, fencing.ErrForeignToken}, {distlock.Token{Name: "ledger"}, distlock.ErrInvalidToken}} {
			if err := f.Admit(ctx, c.t); !errors.Is(err, c.want) {
				t.Fatalf("admit %v: %v, want %v", c.t, err, c.want)
			}
		}
		counts := map[string]int64{}
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				sum, ok := m.Data.(metricdata.Sum[int64])
				if !ok {
					continue
				}
				for _, dp := range sum.DataPoints {
					reason, _ := dp.Attributes.Value("reason")
					if kind, ok := dp.Attributes.Value("distlock.fence.kind"); !ok || kind.AsString() == "" {
						t.Errorf("%s without distlock.fence.kind", m.Name)
					}
					counts[m.Name+"/"+reason.AsString()] += dp.Value
				}
			}
		}
		want := map[string]int64{"distlock.fence.admitted/": 3, "distlock.fence.refused/stale": 1,
			"distlock.fence.refused/fork": 1, "distlock.fence.refused/foreign": 1, "distlock.fence.refused/malformed": 1}
		for k, v := range want {
			if counts[k] != v {
				t.Errorf("%s = %d, want %d (all: %v)", k, counts[k], v, counts)
			}
		}
		var own, zombie int
		for _, s := range spans.Ended() {
			for _, ev := range s.Events() {
				if ev.Name != "distlock.fence.refused" {
					continue
				}
				if s.Name() == "zombie write" {
					zombie++
					attrs := attribute.NewSet(ev.Attributes...)
					refused, _ := attrs.Value("distlock.token")
					newest, _ := attrs.Value("distlock.fence.newest")
					if refused.AsString() != tok(6).String() || newest.AsString() != tok(7).String() {
						t.Errorf("the zombie's event names %q refused for %q, want %v for %v", refused.AsString(), newest.AsString(), tok(6), tok(7))
					}
				} else {
					own++
				}
			}
		}
		if zombie != 1 || own != 3 {
			t.Errorf("refusal events: %d on the writer's span (want 1), %d on spans of their own (want 3)", zombie, own)
		}
	})
}

// Shuffled deals the tokens 1..workers*each to the workers in random
// order: few are admitted, most refused at once.
func Shuffled(workers, each int) func(w int) []int64 {
	perm := rand.Perm(workers * each)
	return func(w int) []int64 {
		seqs := make([]int64, each)
		for i := range seqs {
			seqs[i] = int64(perm[w*each+i] + 1)
		}
		return seqs
	}
}

// Rising deals the tokens 1..workers*each round-robin, each worker's in
// rising order: most are admitted, and their commits conflict.
func Rising(workers, each int) func(w int) []int64 {
	return func(w int) []int64 {
		seqs := make([]int64, each)
		for i := range seqs {
			seqs[i] = int64(i*workers + w + 1)
		}
		return seqs
	}
}

// Race has workers goroutines admit the tokens order(w) at once through
// admit, and checks the fencing rule on the outcomes: a token is refused
// only as stale, for a newer token that was admitted, and the newest token
// is admitted. It returns the admitted tokens.
func Race(t *testing.T, workers, each int, order func(w int) []int64, admit func(w int, seq int64) error) map[int64]bool {
	t.Helper()
	type outcome struct {
		seq, newest int64
		err         error
	}
	var (
		mu  sync.Mutex
		out []outcome
		wg  sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, seq := range order(w) {
				err := admit(w, seq)
				o := outcome{seq: seq, err: err}
				var stale *fencing.StaleError
				if errors.As(err, &stale) {
					o.newest = stale.Newest.Seq
				}
				mu.Lock()
				out = append(out, o)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	admitted := map[int64]bool{}
	for _, o := range out {
		if o.err == nil {
			admitted[o.seq] = true
		}
	}
	for _, o := range out {
		switch {
		case o.err == nil:
		case !errors.Is(o.err, fencing.ErrStale):
			t.Errorf("token %d: %v", o.seq, o.err)
		case o.newest <= o.seq || !admitted[o.newest]:
			t.Errorf("token %d refused for %d, not a newer admitted token", o.seq, o.newest)
		}
	}
	if max := int64(workers * each); !admitted[max] {
		t.Errorf("the newest token %d was refused", max)
	}
	t.Logf("%d of %d tokens admitted", len(admitted), len(out))
	return admitted
}
