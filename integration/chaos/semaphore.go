package chaos

import (
	"context"
	"fmt"
	"sort"

	"github.com/distlock/distlock"
)

// semaphorePermits is the SemaphoreWorkload's N: fewer than the default 3
// workers, so that someone always waits.
const semaphorePermits = 2

// SemaphoreWorkload acquires a permit of a semaphore of two permits, holds
// it a moment and releases it. Checked: no two holds of one slot overlap,
// never more than N holds at once, and each slot's tokens grow from one
// holder to the next. (Its FIFO order is the contract suite's to check:
// grants to waiters that were served together may return in any order.)
type SemaphoreWorkload struct{}

// Name implements Workload.
func (SemaphoreWorkload) Name() string { return "semaphore" }

// Setup implements Workload.
func (SemaphoreWorkload) Setup(context.Context, *Env) error { return nil }

// Close implements Workload.
func (SemaphoreWorkload) Close() error { return nil }

// Worker implements Workload.
func (SemaphoreWorkload) Worker(ctx context.Context, env *Env, i int) {
	proc := fmt.Sprintf("w%d", i)
	sessionLoop(ctx, env, i, func(s Session) {
		sem, err := s.Semaphore(env.Lock, semaphorePermits)
		if err != nil {
			env.Log.Error("chaos: semaphore", "err", err)
			return
		}
		op := env.History.Invoke(Op{Process: proc, Kind: KindAcquire, Mode: "permit"})
		actx, cancel := context.WithTimeout(ctx, 4*env.Store.TTL())
		p, err := sem.Acquire(actx)
		cancel()
		if err != nil {
			env.History.Complete(op, Fail, err)
			return
		}
		env.History.Update(op, func(o *Op) { o.Token = p.Token().String() })
		env.History.Complete(op, OK, nil)
		env.SetHolder(i)
		held(env, proc, "permit", p.Token(), p.Done(), p.Err, p.Release)
		env.SetHolder(-1)
	})
}

// Check implements Workload.
func (SemaphoreWorkload) Check(_ *Env, ops []Op) []Check {
	return []Check{checkSlotExclusion(ops), checkAtMostN(ops, semaphorePermits), checkSlotTokens(ops)}
}

// permitHolds returns the holds of permits (see holdsOf), with their
// tokens parsed.
func permitHolds(ops []Op) (holds []permitHold, excluded int) {
	hs, excluded := holdsOf(ops, func(op Op) bool { return op.Mode == "permit" })
	for _, h := range hs {
		if t, err := distlock.ParseToken(h.tok); err == nil {
			holds = append(holds, permitHold{proc: h.proc, tok: t, from: h.from, to: h.to})
		}
	}
	return holds, excluded
}

type permitHold struct {
	proc     string
	tok      distlock.Token
	from, to int64
}

// checkSlotExclusion checks that no two holds of one slot overlap.
func checkSlotExclusion(ops []Op) Check {
	c := Check{Name: "slot-exclusion", Subject: "semaphore"}
	holds, excluded := permitHolds(ops)
	var bad []string
	for i, a := range holds {
		for _, b := range holds[i+1:] {
			if b.from < a.to && a.tok.Name == b.tok.Name {
				c.Violations++
				bad = append(bad, fmt.Sprintf("%s %s overlaps %s %s", a.proc, a.tok, b.proc, b.tok))
			}
		}
	}
	c.Checked, c.OK = len(holds), c.Violations == 0
	c.Detail = limit(append([]string{fmt.Sprintf("%d holds, %d excluded (forced expiries)", len(holds), excluded)}, bad...))
	return c
}

// checkAtMostN checks that no more than n holds overlap at any instant.
func checkAtMostN(ops []Op, n int) Check {
	c := Check{Name: "at-most-n", Subject: "semaphore"}
	holds, _ := permitHolds(ops)
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, h := range holds {
		edges = append(edges, edge{h.from, 1}, edge{h.to, -1})
	}
	// Ends before starts at the same instant: a release then a grant.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at != edges[j].at {
			return edges[i].at < edges[j].at
		}
		return edges[i].delta < edges[j].delta
	})
	in, peak := 0, 0
	for _, e := range edges {
		in += e.delta
		if in > n {
			c.Violations++
		}
		peak = max(peak, in)
	}
	c.Checked, c.OK = len(holds), c.Violations == 0
	c.Detail = fmt.Sprintf("%d holds, at most %d at once (N=%d)", len(holds), peak, n)
	return c
}

// checkSlotTokens checks that each slot's tokens grow in the order its
// holds began.
func checkSlotTokens(ops []Op) Check {
	c := Check{Name: "slot-tokens-increase", Subject: "semaphore"}
	holds, _ := permitHolds(ops)
	last := map[string]distlock.Token{}
	var bad []string
	for _, h := range holds {
		c.Checked++
		if prev, ok := last[h.tok.Name]; ok && !h.tok.Newer(prev) {
			c.Violations++
			bad = append(bad, fmt.Sprintf("%s: %s after %s", h.tok.Name, h.tok, prev))
		}
		last[h.tok.Name] = h.tok
	}
	c.OK = c.Violations == 0
	c.Detail = limit(bad)
	return c
}
