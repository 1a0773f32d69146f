package fencing_test

import (
	"context"
	"errors"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/internal/fencetest"
)

func TestMemoryContract(t *testing.T) {
	fencetest.Run(t, func(t *testing.T, _, lock string) fencing.Fence {
		m, err := fencing.NewMemory(lock)
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
