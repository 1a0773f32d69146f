package chaos

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
)

// sessionLoop runs body with a live session of worker i's client until
// ctx ends, opening a new session when the last one ended.
func sessionLoop(ctx context.Context, env *Env, i int, body func(s Session)) {
	sessionLoopWith(ctx, env, i, nil, body)
}

// sessionLoopWith is sessionLoop with the options opts returns for each
// new session (nil: none).
func sessionLoopWith(ctx context.Context, env *Env, i int, opts func() []SessionOption, body func(s Session)) {
	cli := env.Clients[i]
	ttl := env.Store.TTL()
	var sess Session
	closeSess := func() {
		if sess != nil {
			cctx, cancel := context.WithTimeout(context.Background(), 2*ttl)
			sess.Close(cctx)
			cancel()
			sess = nil
		}
	}
	defer closeSess()
	for ctx.Err() == nil {
		if sess != nil {
			select {
			case <-sess.Done():
				closeSess()
			default:
			}
		}
		if sess == nil {
			var o []SessionOption
			if opts != nil {
				o = opts()
			}
			sctx, cancel := context.WithTimeout(ctx, 2*ttl)
			s, err := cli.NewSession(sctx, o...)
			cancel()
			if err != nil {
				select {
				case <-time.After(env.WorkerRand(50*time.Millisecond, 300*time.Millisecond)):
				case <-ctx.Done():
				}
				continue
			}
			sess = s
		}
		body(sess)
		if env.WorkerRand(0, 3) < 1 {
			select {
			case <-time.After(env.WorkerRand(10*time.Millisecond, 100*time.Millisecond)):
			case <-ctx.Done():
			}
		}
	}
}

// held is what a worker does with an acquisition: hold it for a moment,
// then release it, recording a lost event if it ended first.
func held(env *Env, proc, mode string, tok distlock.Token, done <-chan struct{}, errf func() error, release func(context.Context) error) {
	h := env.History
	var releasing atomic.Bool
	watch := make(chan struct{})
	go func() {
		defer close(watch)
		<-done
		if !releasing.Load() {
			h.Event(Op{Process: proc, Kind: KindLost, Mode: mode, Token: tok.String(), Outcome: OK, Error: errString(errf())})
		}
	}()
	time.Sleep(env.WorkerRand(time.Millisecond, 20*time.Millisecond))
	rel := h.Invoke(Op{Process: proc, Kind: KindRelease, Mode: mode, Token: tok.String()})
	releasing.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*env.Store.TTL())
	err := release(ctx)
	cancel()
	switch {
	case err == nil:
		h.Complete(rel, OK, nil)
	case errors.Is(err, distlock.ErrLost), errors.Is(err, distlock.ErrSessionExpired), errors.Is(err, distlock.ErrNotLeader):
		h.Complete(rel, Fail, err)
	default:
		h.Complete(rel, Info, err)
	}
	<-watch
}

// RWWorkload takes a read-write lock, as a reader two times in three and
// as a writer otherwise, holds it a moment and releases it. Checked: no
// writer's hold overlaps any other hold (readers may overlap each other).
type RWWorkload struct{}

// Name implements Workload.
func (RWWorkload) Name() string { return "rwlock" }

// Setup implements Workload.
func (RWWorkload) Setup(context.Context, *Env) error { return nil }

// Close implements Workload.
func (RWWorkload) Close() error { return nil }

// Worker implements Workload.
func (RWWorkload) Worker(ctx context.Context, env *Env, i int) {
	proc := fmt.Sprintf("w%d", i)
	sessionLoop(ctx, env, i, func(s Session) {
		rw, err := s.RWMutex(env.Lock)
		if err != nil {
			env.Log.Error("chaos: rwmutex", "err", err)
			return
		}
		mode, lock := "read", rw.RLock
		if env.WorkerRand(0, 3) < 1 {
			mode, lock = "write", rw.Lock
		}
		op := env.History.Invoke(Op{Process: proc, Kind: KindAcquire, Mode: mode})
		lctx, cancel := context.WithTimeout(ctx, 4*env.Store.TTL())
		lease, err := lock(lctx)
		cancel()
		if err != nil {
			env.History.Complete(op, Fail, err)
			return
		}
		env.History.Update(op, func(o *Op) { o.Token = lease.Token().String() })
		env.History.Complete(op, OK, nil)
		env.SetHolder(i)
		held(env, proc, mode, lease.Token(), lease.Done(), lease.Err, lease.Unlock)
		env.SetHolder(-1)
	})
}

// Check implements Workload.
func (RWWorkload) Check(_ *Env, ops []Op) []Check {
	return []Check{checkExclusion(ops, "rwlock")}
}

func tokenText(t distlock.Token) string {
	if t.IsZero() {
		return ""
	}
	return t.String()
}

// checkExclusion checks that no exclusive hold ("write", "leader")
// overlaps another hold. A hold lasts from Lock's return until Unlock was
// called or the holder was told it lost the lock; holds of processes whose
// session was expired from outside are left out (fencing covers them).
func checkExclusion(ops []Op, subject string) Check {
	c := Check{Name: "exclusion", Subject: subject}
	holds, excluded := holdsOf(ops, func(Op) bool { return true })
	var bad []string
	for i, a := range holds {
		for _, b := range holds[i+1:] {
			if b.from >= a.to {
				continue
			}
			if a.mode == "read" && b.mode == "read" {
				continue
			}
			c.Violations++
			bad = append(bad, fmt.Sprintf("%s %s (%s) overlaps %s %s (%s) by %v", a.proc, a.tok, a.mode, b.proc, b.tok, b.mode, time.Duration(min(a.to, b.to)-b.from)))
		}
	}
	c.Checked = len(holds)
	c.OK = c.Violations == 0
	c.Detail = limit(append([]string{fmt.Sprintf("%d holds, %d excluded (forced expiries)", len(holds), excluded)}, bad...))
	return c
}

// hold is one acquisition's hold: from Lock's return until Unlock was
// called or the holder was told it lost the lock.
type hold struct {
	proc, tok, mode string
	from, to        int64
}

// holdsOf returns the holds of the successful acquisitions that keep
// says to, ordered by start, leaving out those of processes whose session
// was expired from outside meanwhile (fencing covers them), and how many
// it left out. A hold ends at the first release, loss or handoff of its
// token by its process; a handoff that found no candidate (Kept) does not
// end it: the leader keeps leading.
func holdsOf(ops []Op, keep func(Op) bool) (holds []hold, excluded int) {
	forced := forcedExpiries(ops)
	for i, op := range ops {
		if op.Kind != KindAcquire || op.Outcome != OK || !keep(op) {
			continue
		}
		h := hold{proc: op.Process, tok: op.Token, mode: op.Mode, from: op.Complete, to: math.MaxInt64}
		for _, o := range ops[i+1:] {
			if o.Process == op.Process && o.Token == op.Token && (o.Kind == KindRelease || o.Kind == KindLost || o.Kind == KindHandOff && !o.Kept) {
				h.to = min(h.to, o.Invoke)
			}
		}
		skip := false
		for _, t := range forced[op.Process] {
			if t >= op.Invoke && t <= h.to {
				skip = true
			}
		}
		if skip {
			excluded++
			continue
		}
		holds = append(holds, h)
	}
	sort.Slice(holds, func(i, j int) bool { return holds[i].from < holds[j].from })
	return holds, excluded
}
