// Package fencetest is the contract every fencing backend meets, as one
// suite run against real stores: equal tokens admitted again, older ones
// refused with the newer one named, foreign and invalid tokens refused,
// fences of different resources independent, and under concurrency no
// token refused unless a newer one was admitted.
package fencetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
)

// NewFence returns a fresh fence (never used before) for a resource
// guarded by lock. Fences returned for different resources must not share
// state; resource is unique per call within a test.
type NewFence func(t *testing.T, resource, lock string) fencing.Fence

// Ctx returns a context that ends with the test or after a minute.
func Ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Run runs the contract against fences made by newFence.
func Run(t *testing.T, newFence NewFence) {
	n := 0
	fresh := func(t *testing.T, lock string) fencing.Fence {
		n++
		return newFence(t, t.Name()+"-"+string(rune('a'+n%26)), lock)
	}
	tok := func(seq int64) distlock.Token { return distlock.Token{Name: "ledger", Seq: seq} }

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
		if !errors.Is(err, fencing.ErrStale) || !errors.As(err, &stale) {
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
		if err := f.Admit(ctx, distlock.Token{Name: "other", Seq: 9}); !errors.Is(err, fencing.ErrForeignToken) {
			t.Errorf("token of another lock: %v, want ErrForeignToken", err)
		}
		for _, bad := range []distlock.Token{{}, {Name: "ledger"}, {Name: "ledger", Seq: -3}, {Name: "led ger", Seq: 3}} {
			if err := f.Admit(ctx, bad); !errors.Is(err, distlock.ErrInvalidToken) {
				t.Errorf("token %#v: %v, want ErrInvalidToken", bad, err)
			}
		}
		// None of those counted: a small valid token is still admitted.
		if err := f.Admit(ctx, tok(1)); err != nil {
			t.Fatalf("admit 1 after refusals: %v", err)
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
		if err := c.Admit(ctx, distlock.Token{Name: "ledger/eu", Seq: 2}); err != nil {
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
