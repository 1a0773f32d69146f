package chaos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
)

// RegisterWorkload is the mutex workload: workers take the lock, and in
// each critical section read every register and write it back plus one.
// The registers are fenced in memory, fenced in the store, and unfenced
// (the control).
type RegisterWorkload struct {
	regs []*loggedRegister
	srv  *registerServer
	cs   atomic.Int64 // critical section numbers

	stallPoint
	successors
}

// Name implements Workload.
func (w *RegisterWorkload) Name() string { return "register" }

// Setup implements Workload.
func (w *RegisterWorkload) Setup(ctx context.Context, env *Env) error {
	mem, err := newMemRegister(env.Lock)
	if err != nil {
		return err
	}
	store, err := env.Clients[0].Register(ctx, fmt.Sprintf("store-%d", time.Now().UnixNano()), env.Lock)
	if err != nil {
		return fmt.Errorf("chaos: store register: %w", err)
	}
	w.regs = []*loggedRegister{{Register: mem}, {Register: named{store, "store"}}, {Register: &unfencedRegister{}}}
	w.resetSuccessors()
	w.reset()
	w.srv, err = newRegisterServer(w.regs)
	return err
}

// named renames a register.
type named struct {
	Register
	name string
}

func (n named) Name() string { return n.name }

// Close implements Workload.
func (w *RegisterWorkload) Close() error {
	if w.srv != nil {
		return w.srv.Close()
	}
	return nil
}

// Worker implements Workload.
func (w *RegisterWorkload) Worker(ctx context.Context, env *Env, i int) {
	proc := fmt.Sprintf("w%d", i)
	cli := env.Clients[i]
	ttl := env.Store.TTL()
	var sess Session
	defer func() {
		if sess != nil {
			cctx, cancel := context.WithTimeout(context.Background(), 2*ttl)
			sess.Close(cctx)
			cancel()
		}
	}()
	backoff := func() {
		select {
		case <-time.After(env.WorkerRand(50*time.Millisecond, 300*time.Millisecond)):
		case <-ctx.Done():
		}
	}
	for ctx.Err() == nil {
		if sess != nil {
			select {
			case <-sess.Done():
				cctx, cancel := context.WithTimeout(context.Background(), ttl)
				sess.Close(cctx)
				cancel()
				sess = nil
			default:
			}
		}
		if sess == nil {
			sctx, cancel := context.WithTimeout(ctx, 2*ttl)
			s, err := cli.NewSession(sctx)
			cancel()
			if err != nil {
				backoff()
				continue
			}
			sess = s
		}
		mu, err := sess.Mutex(env.Lock)
		if err != nil {
			env.Log.Error("chaos: mutex", "err", err)
			return
		}
		w.criticalSection(ctx, env, proc, i, mu)
		// Let others in now and then, so that queues form and drain.
		if env.WorkerRand(0, 3) < 1 {
			backoff()
		}
	}
}

func (w *RegisterWorkload) criticalSection(ctx context.Context, env *Env, proc string, i int, mu distlock.Locker) {
	h := env.History
	ttl := env.Store.TTL()
	acq := h.Invoke(Op{Process: proc, Kind: KindAcquire})
	lctx, cancel := context.WithTimeout(ctx, 4*ttl)
	lease, err := mu.Lock(lctx)
	cancel()
	if err != nil {
		// Lock leaves nothing held when it fails.
		h.Complete(acq, Fail, err)
		return
	}
	tok := lease.Token()
	h.Update(acq, func(o *Op) { o.Token = tok.String() })
	h.Complete(acq, OK, nil)
	env.SetHolder(i)
	var releasing atomic.Bool
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		<-lease.Done()
		if !releasing.Load() {
			h.Event(Op{Process: proc, Kind: KindLost, Token: tok.String(), Outcome: OK, Error: errString(lease.Err())})
		}
	}()

	// The critical section goes on whatever the lease says: refusing a
	// holder that lost its lock is the fence's job.
	if resume := w.take(i, tok, nil); resume != nil {
		// A nemesis asked this worker to stall inside its critical
		// section (between its reads and its writes) while it expires
		// the session: the holder then writes after its successor.
		w.stalledSection(env, proc, tok, resume)
	} else {
		cctx, cancel := context.WithTimeout(context.Background(), 2*ttl)
		for _, r := range w.regs {
			w.readWrite(cctx, env, proc, r, tok)
		}
		cancel()
	}

	env.SetHolder(-1)
	rel := h.Invoke(Op{Process: proc, Kind: KindRelease, Token: tok.String()})
	releasing.Store(true)
	uctx, cancel := context.WithTimeout(context.Background(), 2*ttl)
	err = lease.Unlock(uctx)
	cancel()
	switch {
	case err == nil:
		h.Complete(rel, OK, nil)
	case errors.Is(err, distlock.ErrLost), errors.Is(err, distlock.ErrSessionExpired):
		h.Complete(rel, Fail, err)
	default:
		h.Complete(rel, Info, err)
	}
	<-watchDone
}

// readWrite is one register's part of a critical section: read, then
// write the value read plus one.
func (w *RegisterWorkload) readWrite(ctx context.Context, env *Env, proc string, r *loggedRegister, tok distlock.Token) {
	h := env.History
	cs := w.cs.Add(1)
	rd := h.Invoke(Op{Process: proc, Kind: KindRead, Register: r.Name(), Token: tok.String(), CS: cs})
	v, err := r.Read(ctx, tok)
	h.Update(rd, func(o *Op) { o.Value = v })
	h.Complete(rd, outcomeOf(err), err)
	if err != nil {
		return
	}
	wr := h.Invoke(Op{Process: proc, Kind: KindWrite, Register: r.Name(), Token: tok.String(), CS: cs, Value: v + 1})
	order, err := r.Write(ctx, tok, v+1)
	h.Update(wr, func(o *Op) { o.Order = order })
	h.Complete(wr, outcomeOf(err), err)
	if err == nil {
		w.noteWrite(r.Name(), tok)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// holderReads is what a child-process holder read at the start of its
// critical section.
type holderReads struct {
	proc string
	tok  distlock.Token
	cs   map[string]int64
	v    map[string]int64
}

// HolderAcquired reads every register with the child holder's token: the
// start of its critical section, before it is paused.
func (w *RegisterWorkload) HolderAcquired(ctx context.Context, env *Env, hd *integration.Holder) any {
	proc := fmt.Sprintf("holder-%d", hd.PID())
	tok := hd.Token()
	hr := &holderReads{proc: proc, tok: tok, cs: map[string]int64{}, v: map[string]int64{}}
	for _, r := range w.regs {
		cs := w.cs.Add(1)
		rd := env.History.Invoke(Op{Process: proc, Kind: KindRead, Register: r.Name(), Token: tok.String(), CS: cs})
		v, err := r.Read(ctx, tok)
		env.History.Update(rd, func(o *Op) { o.Value = v })
		env.History.Complete(rd, outcomeOf(err), err)
		if err == nil {
			hr.cs[r.Name()], hr.v[r.Name()] = cs, v
		}
	}
	return hr
}

// HolderWaitSuccessor waits until a later holder wrote (or ctx ends).
func (w *RegisterWorkload) HolderWaitSuccessor(ctx context.Context, state any) bool {
	return w.waitNewer(ctx, state.(*holderReads).tok)
}

// HolderResumed makes the resumed holder finish its critical section: it
// writes what it read plus one, through HTTP with its (now stale) token.
func (w *RegisterWorkload) HolderResumed(ctx context.Context, env *Env, hd *integration.Holder, state any) {
	hr := state.(*holderReads)
	for _, r := range w.regs {
		cs, ok := hr.cs[r.Name()]
		if !ok {
			continue
		}
		v := hr.v[r.Name()] + 1
		wr := env.History.Invoke(Op{Process: hr.proc, Kind: KindWrite, Register: r.Name(), Token: hr.tok.String(), CS: cs, Value: v})
		status, err := hd.Write(ctx, w.srv.URL(r.Name()), strconv.FormatInt(v, 10))
		switch {
		case status == 200:
			env.History.Complete(wr, OK, nil)
		case status == 409 || status == 400:
			env.History.Complete(wr, Fail, err)
		default:
			env.History.Complete(wr, Info, err)
		}
	}
}

// stalledSection is a critical section that reads every register, waits
// for resume, then writes them all with its (by then stale) token.
func (w *RegisterWorkload) stalledSection(env *Env, proc string, tok distlock.Token, resume <-chan struct{}) {
	h := env.History
	ttl := env.Store.TTL()
	type rd struct {
		cs int64
		v  int64
	}
	reads := map[string]rd{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*ttl)
	for _, r := range w.regs {
		cs := w.cs.Add(1)
		op := h.Invoke(Op{Process: proc, Kind: KindRead, Register: r.Name(), Token: tok.String(), CS: cs})
		v, err := r.Read(ctx, tok)
		h.Update(op, func(o *Op) { o.Value = v })
		h.Complete(op, outcomeOf(err), err)
		if err == nil {
			reads[r.Name()] = rd{cs, v}
		}
	}
	cancel()
	select {
	case <-resume:
	case <-time.After(10 * ttl):
	}
	ctx, cancel = context.WithTimeout(context.Background(), 2*ttl)
	defer cancel()
	for _, r := range w.regs {
		x, ok := reads[r.Name()]
		if !ok {
			continue
		}
		op := h.Invoke(Op{Process: proc, Kind: KindWrite, Register: r.Name(), Token: tok.String(), CS: x.cs, Value: x.v + 1})
		order, err := r.Write(ctx, tok, x.v+1)
		h.Update(op, func(o *Op) { o.Order = order })
		h.Complete(op, outcomeOf(err), err)
		if err == nil {
			w.noteWrite(r.Name(), tok)
		}
	}
}

// WaitSuccessor waits until a critical section with a token newer than t
// completed, or ctx ends.
func (w *RegisterWorkload) WaitSuccessor(ctx context.Context, t distlock.Token) bool {
	return w.waitNewer(ctx, t)
}
