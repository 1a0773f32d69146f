package fencing_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/fencetest"
)

// memoryMulti is DoAll over memory fences, for the multi contract.
type memoryMulti struct {
	fences []*fencing.Memory
	ledger *fencetest.Ledger
}

func (m memoryMulti) Write(ctx context.Context, tokens []distlock.Token, entry int64) error {
	return fencing.DoAll(ctx, tokens, m.fences, func(context.Context) error {
		m.ledger.Append(entry)
		return nil
	})
}

func (m memoryMulti) Newest(context.Context) ([]distlock.Token, error) {
	ts := make([]distlock.Token, len(m.fences))
	for i, f := range m.fences {
		ts[i] = f.Newest()
	}
	return ts, nil
}

func (m memoryMulti) Ledger(context.Context) ([]int64, error) { return m.ledger.Entries(), nil }

func TestMemoryMultiContract(t *testing.T) {
	var (
		mu      sync.Mutex
		fences  = map[string]*fencing.Memory{}
		ledgers = map[string]*fencetest.Ledger{}
	)
	fencetest.RunMulti(t, func(t *testing.T, ledger string, resources, locks []string, opts ...fencing.Option) fencetest.Multi {
		mu.Lock()
		defer mu.Unlock()
		m := memoryMulti{fences: make([]*fencing.Memory, len(resources))}
		for i, r := range resources {
			if fences[r] == nil {
				f, err := fencing.NewMemory(locks[i], opts...)
				if err != nil {
					t.Fatal(err)
				}
				fences[r] = f
			}
			m.fences[i] = fences[r]
		}
		if ledgers[ledger] == nil {
			ledgers[ledger] = &fencetest.Ledger{}
		}
		m.ledger = ledgers[ledger]
		return m
	})
}

func TestDoAll(t *testing.T) {
	ctx := context.Background()
	a, _ := fencing.NewMemory("ledger/a")
	b, _ := fencing.NewMemory("ledger/b")
	toks := fencetest.MultiToks(4, "ledger/a", "ledger/b")
	if err := fencing.DoAll(ctx, toks, []*fencing.Memory{a, nil}, nil); err == nil {
		t.Error("a nil fence accepted")
	}
	if err := fencing.DoAll(ctx, toks, nil, nil); !errors.Is(err, fencing.ErrUnmatched) {
		t.Errorf("no fences: %v", err)
	}
	// The same fence twice would lock its mutex twice: refused as two
	// fences of one lock.
	if err := fencing.DoAll(ctx, toks[:1], []*fencing.Memory{a, a}, nil); !errors.Is(err, fencing.ErrUnmatched) {
		t.Errorf("one fence twice: %v", err)
	}
	// A nil write admits.
	if err := fencing.DoAll(ctx, toks, []*fencing.Memory{a, b}, nil); err != nil {
		t.Fatal(err)
	}
	// write's error comes back, and the tokens stay admitted, as with Do.
	boom := errors.New("boom")
	next := fencetest.MultiToks(5, "ledger/a", "ledger/b")
	if err := fencing.DoAll(ctx, next, []*fencing.Memory{b, a}, func(context.Context) error { return boom }); err != boom {
		t.Fatalf("write error: %v", err)
	}
	if a.Newest().Seq != 5 || b.Newest().Seq != 5 {
		t.Fatalf("newest %v %v, want both 5", a.Newest(), b.Newest())
	}
	// The fences are held during the write: a Do on one of them waits.
	held := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- fencing.DoAll(ctx, fencetest.MultiToks(6, "ledger/a", "ledger/b"), []*fencing.Memory{a, b}, func(context.Context) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	admitted := make(chan error, 1)
	go func() { admitted <- b.Admit(ctx, fencetest.MultiTok("ledger/b", 5)) }()
	select {
	case err := <-admitted:
		t.Fatalf("Admit on a fence DoAll holds returned %v", err)
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-admitted; !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("Admit 5 after DoAll 6: %v", err)
	}
	// An ended context stops DoAll before it takes the fences.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := fencing.DoAll(cctx, fencetest.MultiToks(7, "ledger/a", "ledger/b"), []*fencing.Memory{a, b}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestDoAllNoDeadlock has goroutines take overlapping fences in opposite
// orders many times: taking the mutexes in the order given would deadlock
// them.
func TestDoAllNoDeadlock(t *testing.T) {
	ctx := context.Background()
	locks := []string{"x/1", "x/2", "x/3", "x/4"}
	fences := make([]*fencing.Memory, len(locks))
	for i, l := range locks {
		fences[i], _ = fencing.NewMemory(l)
	}
	sets := [][]int{{0, 1, 2}, {2, 1, 0}, {3, 1}, {1, 3, 0}, {2, 3}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var seq int64
	for w, set := range sets {
		wg.Go(func() {
			fs := make([]*fencing.Memory, len(set))
			names := make([]string, len(set))
			for i, j := range set {
				fs[i], names[i] = fences[j], locks[j]
			}
			for range 2000 {
				mu.Lock()
				seq++
				s := seq
				mu.Unlock()
				err := fencing.DoAll(ctx, fencetest.MultiToks(s, names...), fs, func(context.Context) error { return nil })
				if err != nil && !errors.Is(err, fencing.ErrStale) {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
