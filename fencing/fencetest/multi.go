package fencetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Multi is a backend's write across several locks as RunMulti drives it:
// a fixed list of fences, each guarding its own resource with its own
// lock, and a ledger the write appends to.
type Multi interface {
	// Write admits tokens at the fences (each fence takes the token of
	// its lock) and appends entry to the ledger, as one atomic step: both
	// happen only if every fence admits its token, and otherwise neither,
	// with the backend's refusal as the error.
	Write(ctx context.Context, tokens []distlock.Token, entry int64) error
	// Newest returns the newest token each fence admitted (the zero Token
	// for none), in the fences' order.
	Newest(ctx context.Context) ([]distlock.Token, error)
	// Ledger returns the entries Write appended to the ledger, in commit
	// order.
	Ledger(ctx context.Context) ([]int64, error)
}

// NewMulti returns a Multi over one fence per resource, resources[i]
// guarded by the lock called locks[i], appending to the ledger called
// ledger, reporting decisions as opts say. Fences made for the same
// resource name share their state (the same newest token), also across
// calls (another Multi over them in another order); Multis made with the
// same ledger name append to one ledger. Names are unique per test, made
// of [a-z0-9-].
type NewMulti func(t *testing.T, ledger string, resources, locks []string, opts ...fencing.Option) Multi

// Lock names the multi suite's fences guard with.
const (
	LockA = "ledger/a"
	LockB = "ledger/b"
	LockC = "ledger/c"
)

// MultiTok returns the token of lock with sequence number seq and owner
// Owner: one acquisition of several locks carries one of these per lock,
// all with one seq.
func MultiTok(lock string, seq int64) distlock.Token {
	return distlock.Token{Name: lock, Seq: seq, Owner: Owner}
}

// MultiToks returns the tokens of one acquisition of locks with sequence
// number seq.
func MultiToks(seq int64, locks ...string) []distlock.Token {
	ts := make([]distlock.Token, len(locks))
	for i, l := range locks {
		ts[i] = MultiTok(l, seq)
	}
	return ts
}

// RunMulti runs the contract of a write across several locks against
// Multis made by newMulti: every token fresh admits all and writes; one
// stale or forked token refuses the whole write (no fence changed, nothing
// written) and the error names that fence's lock and token (when several
// refuse, the error is one line naming at least one of them, each if it
// is a *fencing.RefusalsError); the same
// tokens again are admitted (a retry); tokens and fences that do not pair
// up by lock are refused with fencing.ErrUnmatched; concurrent writes on
// overlapping fences, given in opposite orders, apply in token order and
// never deadlock; and each fence counts its own decisions.
func RunMulti(t *testing.T, newMulti NewMulti) {
	n := 0
	name := func(t *testing.T, what string) string {
		n++
		s := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
		return fmt.Sprintf("%s-%s%d", s, what, n)
	}
	fresh := func(t *testing.T, ledger string, locks ...string) (Multi, []string) {
		rs := make([]string, len(locks))
		for i := range rs {
			rs[i] = name(t, "r")
		}
		return newMulti(t, ledger, rs, locks), rs
	}
	newest := func(t *testing.T, ctx context.Context, m Multi, want ...distlock.Token) {
		t.Helper()
		got, err := m.Newest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("newest tokens %v, want %v", got, want)
		}
	}
	ledger := func(t *testing.T, ctx context.Context, m Multi, want ...int64) {
		t.Helper()
		got, err := m.Ledger(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("ledger %v, want %v", got, want)
		}
	}
	zero := distlock.Token{}

	t.Run("AllFresh", func(t *testing.T) {
		ctx := Ctx(t)
		m, _ := fresh(t, name(t, "l"), LockA, LockB, LockC)
		newest(t, ctx, m, zero, zero, zero)
		// Tokens in another order than the fences: each fence takes its own.
		if err := m.Write(ctx, MultiToks(5, LockC, LockA, LockB), 5); err != nil {
			t.Fatalf("write 5: %v", err)
		}
		newest(t, ctx, m, MultiTok(LockA, 5), MultiTok(LockB, 5), MultiTok(LockC, 5))
		// The same acquisition again (a retry), then a newer one.
		for _, s := range []int64{5, 8} {
			if err := m.Write(ctx, MultiToks(s, LockA, LockB, LockC), s); err != nil {
				t.Fatalf("write %d: %v", s, err)
			}
		}
		newest(t, ctx, m, MultiTok(LockA, 8), MultiTok(LockB, 8), MultiTok(LockC, 8))
		ledger(t, ctx, m, 5, 5, 8)
	})

	t.Run("OneStale", func(t *testing.T) {
		ctx := Ctx(t)
		l := name(t, "l")
		m, rs := fresh(t, l, LockA, LockB, LockC)
		// Lock b alone moves on: its fence admits 9 through a Multi of its
		// own (a holder of b alone).
		b := newMulti(t, l, rs[1:2], []string{LockB})
		if err := b.Write(ctx, MultiToks(9, LockB), 9); err != nil {
			t.Fatal(err)
		}
		if err := m.Write(ctx, MultiToks(5, LockA, LockB, LockC), 5); err != nil {
			var stale *fencing.StaleError
			if !errors.Is(err, fencing.ErrStale) || !errors.As(err, &stale) || fencing.Reason(err) != "stale" {
				t.Fatalf("write 5 after b admitted 9: %v, want a *StaleError", err)
			}
			if stale.Token != MultiTok(LockB, 5) || stale.Newest != MultiTok(LockB, 9) {
				t.Fatalf("stale error names %v and %v, want %v and %v", stale.Token, stale.Newest, MultiTok(LockB, 5), MultiTok(LockB, 9))
			}
			if !strings.Contains(err.Error(), LockB+"@5") || strings.Contains(err.Error(), LockA+"@") {
				t.Errorf("error %q does not name b's token alone", err)
			}
		} else {
			t.Fatal("write 5 after b admitted 9: admitted")
		}
		// Nothing changed: no fence recorded 5, nothing was written.
		newest(t, ctx, m, zero, MultiTok(LockB, 9), zero)
		ledger(t, ctx, m, 9)
		// 10 moves all of them on; then 9 is stale at a and c too.
		if err := m.Write(ctx, MultiToks(10, LockA, LockB, LockC), 10); err != nil {
			t.Fatalf("write 10: %v", err)
		}
		err := m.Write(ctx, MultiToks(9, LockA, LockB, LockC), 9)
		var stale *fencing.StaleError
		if !errors.As(err, &stale) || stale.Newest.Seq != 10 {
			t.Fatalf("write 9 after 10: %v, want a *StaleError naming 10", err)
		}
		// Every fence refuses 9: the error names at least one (a backend
		// that decides all at once names each, one that admits in turn the
		// first).
		if !strings.Contains(err.Error(), "@9") {
			t.Errorf("error %q names no refused token", err)
		}
		newest(t, ctx, m, MultiTok(LockA, 10), MultiTok(LockB, 10), MultiTok(LockC, 10))
		ledger(t, ctx, m, 9, 10)
	})

	t.Run("TwoStale", func(t *testing.T) {
		ctx := Ctx(t)
		l := name(t, "l")
		m, rs := fresh(t, l, LockA, LockB, LockC)
		// Locks a and c alone move on, to 7 and 9.
		for _, alone := range []struct {
			i    int
			lock string
			seq  int64
		}{{0, LockA, 7}, {2, LockC, 9}} {
			if err := newMulti(t, l, rs[alone.i:alone.i+1], []string{alone.lock}).Write(ctx, MultiToks(alone.seq, alone.lock), alone.seq); err != nil {
				t.Fatal(err)
			}
		}
		err := m.Write(ctx, MultiToks(5, LockA, LockB, LockC), 5)
		if !errors.Is(err, fencing.ErrStale) || fencing.Reason(err) != "stale" {
			t.Fatalf("write 5 after a admitted 7 and c 9: %v, want ErrStale", err)
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") {
			t.Errorf("error of two refusals spans lines: %q", msg)
		}
		// A backend that decides all at once names each refusal (a
		// *fencing.RefusalsError); one that admits in turn, the first.
		var many *fencing.RefusalsError
		if errors.As(err, &many) {
			var got []string
			for _, e := range many.Errs {
				var stale *fencing.StaleError
				if !errors.As(e, &stale) {
					t.Fatalf("refusal %v is not a *StaleError", e)
				}
				got = append(got, stale.Token.String()+"<"+stale.Newest.String())
			}
			want := []string{MultiTok(LockA, 5).String() + "<" + MultiTok(LockA, 7).String(), MultiTok(LockC, 5).String() + "<" + MultiTok(LockC, 9).String()}
			if fmt.Sprint(got) != fmt.Sprint(want) || many.Tokens != 3 {
				t.Fatalf("refusals %v of %d tokens, want %v of 3", got, many.Tokens, want)
			}
			if !strings.HasPrefix(msg, "fencing: 2 of 3 tokens refused: ") || !strings.Contains(msg, LockA+"@5") || !strings.Contains(msg, LockC+"@5") || strings.Contains(msg, LockB+"@") {
				t.Errorf("error %q does not name a's and c's refused tokens alone", msg)
			}
		} else if !strings.Contains(msg, "@5") {
			t.Errorf("error %q names no refused token", msg)
		}
		newest(t, ctx, m, MultiTok(LockA, 7), zero, MultiTok(LockC, 9))
		ledger(t, ctx, m, 7, 9)
	})

	t.Run("Fork", func(t *testing.T) {
		ctx := Ctx(t)
		l := name(t, "l")
		m, rs := fresh(t, l, LockA, LockB)
		if err := m.Write(ctx, MultiToks(7, LockA, LockB), 7); err != nil {
			t.Fatal(err)
		}
		// Lock a's 7 with another owner: a forked history issued it.
		forked := []distlock.Token{{Name: LockA, Seq: 7, Owner: Owner + 1}, MultiTok(LockB, 7)}
		err := m.Write(ctx, forked, 70)
		var fork *fencing.ForkError
		if !errors.Is(err, fencing.ErrFork) || !errors.As(err, &fork) || errors.Is(err, fencing.ErrStale) {
			t.Fatalf("write with a forked token of a: %v, want a *ForkError alone", err)
		}
		if fork.Token != forked[0] || fork.Admitted != MultiTok(LockA, 7) {
			t.Fatalf("fork error names %v and %v", fork.Token, fork.Admitted)
		}
		newest(t, ctx, m, MultiTok(LockA, 7), MultiTok(LockB, 7))
		ledger(t, ctx, m, 7)
		// The fork of a alone, at a fence of a alone: refused too.
		a := newMulti(t, l, rs[:1], []string{LockA})
		if err := a.Write(ctx, forked[:1], 71); !errors.Is(err, fencing.ErrFork) {
			t.Fatalf("forked token at a alone: %v", err)
		}
		ledger(t, ctx, m, 7)
	})

	t.Run("Unmatched", func(t *testing.T) {
		ctx := Ctx(t)
		m, _ := fresh(t, name(t, "l"), LockA, LockB)
		for _, c := range []struct {
			why    string
			tokens []distlock.Token
		}{
			{"no token of b", MultiToks(3, LockA)},
			{"a token no fence takes", MultiToks(3, LockA, LockB, LockC)},
			{"two tokens of a", append(MultiToks(3, LockA, LockB), MultiTok(LockA, 4))},
			{"no tokens", nil},
		} {
			if err := m.Write(ctx, c.tokens, 3); !errors.Is(err, fencing.ErrUnmatched) || fencing.Reason(err) != "" {
				t.Errorf("%s: %v, want ErrUnmatched", c.why, err)
			}
		}
		// Two fences of one lock.
		dup := newMulti(t, name(t, "l"), []string{name(t, "r"), name(t, "r")}, []string{LockA, LockA})
		if err := dup.Write(ctx, MultiToks(3, LockA), 3); !errors.Is(err, fencing.ErrUnmatched) {
			t.Errorf("two fences of one lock: %v, want ErrUnmatched", err)
		}
		// An invalid token is refused by its fence, as a single write's.
		bad := []distlock.Token{MultiTok(LockA, 3), {Name: LockB, Seq: 3}}
		if err := m.Write(ctx, bad, 3); !errors.Is(err, distlock.ErrInvalidToken) {
			t.Errorf("a token without owner: %v, want ErrInvalidToken", err)
		}
		newest(t, ctx, m, zero, zero)
		ledger(t, ctx, m)
		// None of that counted: 1 is admitted.
		if err := m.Write(ctx, MultiToks(1, LockA, LockB), 1); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		// Two writers hold overlapping pairs of locks, {a, b} and {b, c},
		// and a third {b, a}: the fences of a and b in the opposite order
		// to the first. Each writes with rising tokens; the ledger, in
		// commit order, must rise, hold exactly the admitted writes, and
		// every refusal must name a newer admitted token.
		ctx := Ctx(t)
		l := name(t, "l")
		ra, rb, rc := name(t, "r"), name(t, "r"), name(t, "r")
		ms := []Multi{
			newMulti(t, l, []string{ra, rb}, []string{LockA, LockB}),
			newMulti(t, l, []string{rb, rc}, []string{LockB, LockC}),
			newMulti(t, l, []string{rb, ra}, []string{LockB, LockA}),
		}
		locks := [][]string{{LockA, LockB}, {LockB, LockC}, {LockB, LockA}}
		const each = 12
		admitted := Race(t, len(ms), each, Rising(len(ms), each), func(w int, seq int64) error {
			// The tokens in reverse order of the fences: matching is by name.
			return ms[w].Write(ctx, MultiToks(seq, locks[w][1], locks[w][0]), seq)
		})
		got, err := ms[0].Ledger(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range got {
			if i > 0 && s <= got[i-1] {
				t.Errorf("ledger in commit order has %d after %d: %v", s, got[i-1], got)
			}
			if !admitted[s] {
				t.Errorf("ledger has the refused write %d", s)
			}
		}
		if len(got) != len(admitted) {
			t.Errorf("ledger has %d entries, %d writes were admitted", len(got), len(admitted))
		}
		top := int64(len(ms) * each)
		nb, err := ms[1].Newest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if nb[0] != MultiTok(LockB, top) {
			t.Errorf("b's newest %v, want %v", nb[0], MultiTok(LockB, top))
		}
	})

	t.Run("Telemetry", func(t *testing.T) {
		ctx := Ctx(t)
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		l := name(t, "l")
		rs := []string{name(t, "r"), name(t, "r")}
		m := newMulti(t, l, rs, []string{LockA, LockB}, fencing.WithMeterProvider(mp))
		if err := m.Write(ctx, MultiToks(5, LockA, LockB), 5); err != nil {
			t.Fatal(err)
		}
		// b's token is a fork, a's is newer: b refuses, a decides nothing.
		forked := []distlock.Token{MultiTok(LockA, 6), {Name: LockB, Seq: 5, Owner: Owner + 1}}
		if err := m.Write(ctx, forked, 6); !errors.Is(err, fencing.ErrFork) {
			t.Fatalf("write with b's token forked: %v", err)
		}
		// a's token is stale, b's newer: a refuses, b decides nothing.
		if err := m.Write(ctx, []distlock.Token{MultiTok(LockA, 4), MultiTok(LockB, 6)}, 4); !errors.Is(err, fencing.ErrStale) {
			t.Fatalf("write with a's 4 after 5: %v", err)
		}
		if err := m.Write(ctx, MultiToks(6, LockA), 6); !errors.Is(err, fencing.ErrUnmatched) {
			t.Fatalf("write without b's token: %v", err)
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
					lock, _ := dp.Attributes.Value("distlock.lock")
					reason, _ := dp.Attributes.Value("reason")
					counts[m.Name+"/"+lock.AsString()+"/"+reason.AsString()] += dp.Value
				}
			}
		}
		// Each fence counted its own decisions: both admitted 5; b refused
		// the fork and a the stale 4, while the other fence decided nothing
		// (it admitted nothing); the unmatched write counted nowhere.
		want := map[string]int64{
			"distlock.fence.admitted/" + LockA + "/":     1,
			"distlock.fence.admitted/" + LockB + "/":     1,
			"distlock.fence.refused/" + LockB + "/fork":  1,
			"distlock.fence.refused/" + LockA + "/stale": 1,
		}
		for k, v := range want {
			if counts[k] != v {
				t.Errorf("%s = %d, want %d", k, counts[k], v)
			}
		}
		if len(counts) != len(want) {
			t.Errorf("counts %v, want %v", counts, want)
		}
	})
}

// Ledger is an in-memory ledger for a NewMulti whose store keeps none
// (package fencing's memory fences): Append adds entries in the order
// they are appended, under the fences' mutexes.
type Ledger struct {
	mu      sync.Mutex
	entries []int64
}

// Append adds entry.
func (l *Ledger) Append(entry int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, entry)
}

// Entries returns the entries appended so far, in order.
func (l *Ledger) Entries() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int64(nil), l.entries...)
}
