package fencing_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/fencetest"
)

func TestMemoryContract(t *testing.T) {
	fencetest.Run(t, func(t *testing.T, _, lock string, opts ...fencing.Option) fencing.Fence {
		m, err := fencing.NewMemory(lock, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}

func TestMemoryDo(t *testing.T) {
	if _, err := fencing.NewMemory("bad name"); !errors.Is(err, distlock.ErrInvalidName) {
		t.Fatalf("NewMemory(bad name): %v", err)
	}
	m, _ := fencing.NewMemory("ledger")
	ctx := context.Background()
	var ledger []int64
	write := func(seq int64) error {
		return m.Do(ctx, distlock.Token{Name: "ledger", Seq: seq, Owner: 0x5e55}, func(context.Context) error {
			ledger = append(ledger, seq)
			return nil
		})
	}
	for _, s := range []int64{3, 4, 4} {
		if err := write(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := write(3); !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("stale write: %v", err)
	}
	if len(ledger) != 3 || m.Newest().Seq != 4 {
		t.Fatalf("ledger %v newest %v", ledger, m.Newest())
	}
	boom := errors.New("boom")
	if err := m.Do(ctx, distlock.Token{Name: "ledger", Seq: 9, Owner: 0x5e55}, func(context.Context) error { return boom }); err != boom {
		t.Fatalf("write error: %v", err)
	}
	if m.Newest().Seq != 9 {
		t.Fatalf("a failed write's token is still admitted: newest %v", m.Newest())
	}
}

// TestMemoryNeverAdmitsAFork admits random tokens from a small space (few
// sequence numbers, few owners, so forks are frequent) and checks the
// safety property on the outcomes: no two admitted tokens share a sequence
// number with different owners, admissions never go back, and every
// refusal is a stale or fork refusal that matches the state.
func TestMemoryNeverAdmitsAFork(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	for run := range 200 {
		m, _ := fencing.NewMemory("ledger")
		var newest distlock.Token
		ownerOf := map[int64]uint64{}
		for range 30 {
			tok := distlock.Token{Name: "ledger", Seq: 1 + r.Int64N(5), Owner: 1 + r.Uint64N(3)}
			err := m.Admit(ctx, tok)
			switch {
			case err == nil:
				if o, ok := ownerOf[tok.Seq]; ok && o != tok.Owner {
					t.Fatalf("run %d: admitted %v after owner %x was admitted with seq %d", run, tok, o, tok.Seq)
				}
				if tok.Seq < newest.Seq {
					t.Fatalf("run %d: admitted %v after %v", run, tok, newest)
				}
				ownerOf[tok.Seq], newest = tok.Owner, tok
			case errors.Is(err, fencing.ErrStale):
				if tok.Seq >= newest.Seq {
					t.Fatalf("run %d: %v refused as stale, newest %v", run, tok, newest)
				}
			case errors.Is(err, fencing.ErrFork):
				if tok.Seq != newest.Seq || tok.Owner == newest.Owner {
					t.Fatalf("run %d: %v refused as a fork, newest %v", run, tok, newest)
				}
			default:
				t.Fatalf("run %d: %v: %v", run, tok, err)
			}
			if m.Newest() != newest {
				t.Fatalf("run %d: Newest %v, want %v", run, m.Newest(), newest)
			}
		}
	}
}
