package chaos

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/integration"
)

// multiPool names the multi-lock workload's locks, under Env.Lock.
var multiPool = []string{"a", "b", "c"}

// MultiWorkload is the multi-lock workload: each worker takes, again and
// again, one MultiMutex on a random two or three of a pool of three lock
// names, listed in a random order (any two of its acquisitions share a
// name, so a lock that deadlocked on orders would); inside the critical
// section, for every name it holds, it reads three registers of that name
// and writes each back plus one: one fenced in memory, one fenced in the
// store, and the unfenced control. The memory registers of all its names
// are written by one fencing.DoAll, the store registers by one
// etcdfence.WriteAll or zkfence.WriteAll, each with the acquisition's
// token of the register's own name (Lease.Tokens). The holder paused by
// holder-pause takes one name's plain Mutex, which the multi-locks of
// that name must exclude too.
//
// Checked per register as in RegisterWorkload (linearizable, tokens
// increase, no stale admission; the unfenced ones are controls), per
// name (exclusion, lost before the successor, forced expiries fenced,
// FIFO on fault-free runs, each over the history as that name's queue saw
// it), and that every acquisition got one token per name, all of one
// sequence.
type MultiWorkload struct {
	locks []string                     // the pool's lock names, sorted
	regs  map[string][]*loggedRegister // by lock: memory, store, unfenced
	mem   map[string]*memRegister      // by lock
	set   RegisterSet                  // the store registers
	setAt map[string]int               // by lock: index in set
	srv   *registerServer
	cs    atomic.Int64

	stallPoint // hands over the stalled worker's first token
	heldMu     sync.Mutex
	heldBy     map[string][]distlock.Token // by first token: the stalled acquisitions' tokens

	mu       sync.Mutex
	newest   map[string]distlock.Token // by lock: newest token of a write on its unfenced register
	progress chan struct{}             // closed and replaced when one grows
}

// Name implements Workload.
func (w *MultiWorkload) Name() string { return "multilock" }

func (w *MultiWorkload) lockNames() []string { return w.locks }

// short returns a lock's name in the pool ("a").
func short(lock string) string { return path.Base(lock) }

// Setup implements Workload.
func (w *MultiWorkload) Setup(ctx context.Context, env *Env) error {
	w.locks = nil
	for _, n := range multiPool {
		w.locks = append(w.locks, env.Lock+"/"+n)
	}
	slices.Sort(w.locks)
	w.regs, w.mem, w.setAt = map[string][]*loggedRegister{}, map[string]*memRegister{}, map[string]int{}
	stamp := time.Now().UnixNano()
	var names []string
	for i, l := range w.locks {
		names = append(names, fmt.Sprintf("store-%s-%d", short(l), stamp))
		w.setAt[l] = i
	}
	set, err := env.Clients[0].Registers(ctx, names, w.locks)
	if err != nil {
		return fmt.Errorf("chaos: store registers: %w", err)
	}
	w.set = set
	var all []*loggedRegister
	for i, l := range w.locks {
		mem, err := newMemRegister(l)
		if err != nil {
			return err
		}
		w.mem[l] = mem
		s := short(l)
		w.regs[l] = []*loggedRegister{
			{Register: named{mem, "memory-" + s}},
			{Register: named{set.Registers()[i], "store-" + s}},
			{Register: named{&unfencedRegister{}, "unfenced-" + s}},
		}
		all = append(all, w.regs[l]...)
	}
	w.mu.Lock()
	w.newest, w.progress = map[string]distlock.Token{}, make(chan struct{})
	w.mu.Unlock()
	w.reset()
	w.heldMu.Lock()
	w.heldBy = map[string][]distlock.Token{}
	w.heldMu.Unlock()
	w.srv, err = newRegisterServer(all)
	return err
}

// Close implements Workload.
func (w *MultiWorkload) Close() error {
	if w.srv != nil {
		return w.srv.Close()
	}
	return nil
}

// workerIntN returns a random int in [0, n) from the workers' source.
func workerIntN(env *Env, n int) int { return int(env.WorkerRand(0, time.Duration(n))) }

// Worker implements Workload.
func (w *MultiWorkload) Worker(ctx context.Context, env *Env, i int) {
	proc := fmt.Sprintf("w%d", i)
	sessionLoop(ctx, env, i, func(s Session) {
		// A random two or three names, in a random order.
		names := slices.Clone(w.locks)
		for j := len(names) - 1; j > 0; j-- {
			k := workerIntN(env, j+1)
			names[j], names[k] = names[k], names[j]
		}
		names = names[:2+workerIntN(env, len(names)-1)]
		mu, err := s.MultiMutex(names...)
		if err != nil {
			env.Log.Error("chaos: multi-mutex", "err", err)
			return
		}
		w.criticalSection(ctx, env, proc, i, mu, names)
	})
}

// checkTokens says what is wrong with a multi-lock's tokens: one per
// name, sorted by name, all of one sequence and owner.
func checkTokens(toks []distlock.Token, names []string) error {
	sorted := slices.Sorted(slices.Values(names))
	var got []string
	for _, t := range toks {
		got = append(got, t.Name)
	}
	if !slices.Equal(got, sorted) {
		return fmt.Errorf("tokens of %q for names %q", got, sorted)
	}
	for _, t := range toks[1:] {
		if t.Seq != toks[0].Seq || t.Owner != toks[0].Owner {
			return fmt.Errorf("tokens %v and %v differ in sequence or owner", toks[0], t)
		}
	}
	return nil
}

func (w *MultiWorkload) criticalSection(ctx context.Context, env *Env, proc string, i int, mu distlock.Locker, names []string) {
	h := env.History
	ttl := env.Store.TTL()
	acq := h.Invoke(Op{Process: proc, Kind: KindAcquire, Locks: slices.Sorted(slices.Values(names))})
	lctx, cancel := context.WithTimeout(ctx, 4*ttl)
	lease, err := mu.Lock(lctx)
	cancel()
	if err != nil {
		// Lock leaves nothing held when it fails.
		h.Complete(acq, Fail, err)
		return
	}
	toks := lease.Tokens()
	first := lease.Token()
	h.Update(acq, func(o *Op) { o.Token = first.String() })
	// A wrong set of tokens is recorded as the acquisition's error
	// (checkMultiTokens).
	h.Complete(acq, OK, checkTokens(toks, names))
	env.SetHolder(i)
	var releasing atomic.Bool
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		<-lease.Done()
		if !releasing.Load() {
			h.Event(Op{Process: proc, Kind: KindLost, Token: first.String(), Outcome: OK, Error: errString(lease.Err())})
		}
	}()

	// The critical section goes on whatever the lease says: refusing a
	// holder that lost its lock is the fences' job.
	resume := w.takeStall(i, toks)
	rctx, cancel := context.WithTimeout(context.Background(), 2*ttl)
	reads := w.readAll(rctx, env, proc, toks)
	cancel()
	if resume != nil {
		// A nemesis asked this worker to stall between its reads and
		// its writes while it ends its hold from outside: the holder
		// then writes after its successor.
		select {
		case <-resume:
		case <-time.After(10 * ttl):
		}
	}
	wctx, cancel := context.WithTimeout(context.Background(), 2*ttl)
	w.writeAll(wctx, env, proc, reads)
	cancel()

	env.SetHolder(-1)
	rel := h.Invoke(Op{Process: proc, Kind: KindRelease, Token: first.String()})
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

// readOf is one register's read in a critical section, to be written
// back plus one.
type readOf struct {
	lock string
	reg  *loggedRegister
	tok  distlock.Token
	cs   int64
	v    int64
}

// read reads r with tok, recording it; ok if it was read.
func (w *MultiWorkload) read(ctx context.Context, env *Env, proc string, r *loggedRegister, tok distlock.Token) (readOf, bool) {
	h := env.History
	cs := w.cs.Add(1)
	op := h.Invoke(Op{Process: proc, Kind: KindRead, Register: r.Name(), Token: tok.String(), CS: cs})
	v, err := r.Read(ctx, tok)
	h.Update(op, func(o *Op) { o.Value = v })
	h.Complete(op, outcomeOf(err), err)
	return readOf{lock: tok.Name, reg: r, tok: tok, cs: cs, v: v}, err == nil
}

// readAll reads, for every token (one per name held), the name's three
// registers; it returns the reads that succeeded, by kind: memory,
// store, unfenced.
func (w *MultiWorkload) readAll(ctx context.Context, env *Env, proc string, toks []distlock.Token) [3][]readOf {
	var out [3][]readOf
	for _, t := range toks {
		for k, r := range w.regs[t.Name] {
			if rd, ok := w.read(ctx, env, proc, r, t); ok {
				out[k] = append(out[k], rd)
			}
		}
	}
	return out
}

// writeAll writes back what reads read, plus one: the memory registers
// in one fencing.DoAll, the store registers in one WriteAll of the
// store, then the unfenced controls one by one (last: once a successor
// wrote them, its whole critical section is done).
func (w *MultiWorkload) writeAll(ctx context.Context, env *Env, proc string, reads [3][]readOf) {
	h := env.History
	invoke := func(rds []readOf) []*Op {
		ops := make([]*Op, len(rds))
		for k, rd := range rds {
			ops[k] = h.Invoke(Op{Process: proc, Kind: KindWrite, Register: rd.reg.Name(), Token: rd.tok.String(), CS: rd.cs, Value: rd.v + 1})
		}
		return ops
	}
	complete := func(rds []readOf, ops []*Op, orders []int64, err error) {
		out := outcomeOf(err)
		if errors.Is(err, fencing.ErrUnmatched) {
			env.Log.Error("chaos: multi write", "err", err)
			out = Fail // nothing was admitted
		}
		for k, op := range ops {
			if err == nil {
				rds[k].reg.admitted.add(orders[k], rds[k].tok)
				h.Update(op, func(o *Op) { o.Order = orders[k] })
			}
			h.Complete(op, out, err)
		}
	}
	tokens := func(rds []readOf) []distlock.Token {
		var ts []distlock.Token
		for _, rd := range rds {
			ts = append(ts, rd.tok)
		}
		return ts
	}

	if rds := reads[0]; len(rds) > 0 {
		fences := make([]*fencing.Memory, len(rds))
		for k, rd := range rds {
			fences[k] = w.mem[rd.lock].fence
		}
		orders := make([]int64, len(rds))
		ops := invoke(rds)
		err := fencing.DoAll(ctx, tokens(rds), fences, func(context.Context) error {
			for k, rd := range rds {
				m := w.mem[rd.lock]
				m.value = rd.v + 1
				m.seq++
				orders[k] = m.seq
			}
			return nil
		})
		complete(rds, ops, orders, err)
	}
	if rds := reads[1]; len(rds) > 0 {
		idx, vs := make([]int, len(rds)), make([]int64, len(rds))
		for k, rd := range rds {
			idx[k], vs[k] = w.setAt[rd.lock], rd.v+1
		}
		ops := invoke(rds)
		order, err := w.set.WriteAll(ctx, tokens(rds), idx, vs)
		orders := make([]int64, len(rds))
		for k := range orders {
			orders[k] = order
		}
		complete(rds, ops, orders, err)
	}
	for _, rd := range reads[2] {
		op := invoke([]readOf{rd})[0]
		order, err := rd.reg.Write(ctx, rd.tok, rd.v+1)
		h.Update(op, func(o *Op) { o.Order = order })
		h.Complete(op, outcomeOf(err), err)
		if err == nil {
			w.noteWrite(rd.tok)
		}
	}
}

// noteWrite notes a write on t's lock's unfenced register.
func (w *MultiWorkload) noteWrite(t distlock.Token) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := w.newest[t.Name]; n.IsZero() || t.Newer(n) {
		w.newest[t.Name] = t
		close(w.progress)
		w.progress = make(chan struct{})
	}
}

// waitNewer waits until, on the lock of one of toks, a critical section
// with a newer token completed (wrote the lock's last register), or ctx
// ends.
func (w *MultiWorkload) waitNewer(ctx context.Context, toks []distlock.Token) bool {
	for {
		w.mu.Lock()
		newer, ch := false, w.progress
		for _, t := range toks {
			newer = newer || w.newest[t.Name].Newer(t)
		}
		w.mu.Unlock()
		if newer {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// takeStall returns, if worker i was asked to stall, the channel that
// lets it go on, after handing its first token to the nemesis.
func (w *MultiWorkload) takeStall(i int, toks []distlock.Token) <-chan struct{} {
	return w.take(i, toks[0], func() {
		w.heldMu.Lock()
		w.heldBy[toks[0].String()] = toks
		w.heldMu.Unlock()
	})
}

// WaitSuccessor waits until a critical section on one of the names of
// the acquisition whose first token is t, with a newer token, completed,
// or ctx ends.
func (w *MultiWorkload) WaitSuccessor(ctx context.Context, t distlock.Token) bool {
	w.heldMu.Lock()
	toks := w.heldBy[t.String()]
	w.heldMu.Unlock()
	if toks == nil {
		toks = []distlock.Token{t}
	}
	return w.waitNewer(ctx, toks)
}

// HolderAcquired reads the registers of the child holder's lock (one
// name's plain Mutex) with its token, before it is paused.
func (w *MultiWorkload) HolderAcquired(ctx context.Context, env *Env, hd *integration.Holder) any {
	proc := fmt.Sprintf("holder-%d", hd.PID())
	tok := hd.Token()
	hr := &holderReads{proc: proc, tok: tok, cs: map[string]int64{}, v: map[string]int64{}}
	for _, r := range w.regs[tok.Name] {
		if rd, ok := w.read(ctx, env, proc, r, tok); ok {
			hr.cs[r.Name()], hr.v[r.Name()] = rd.cs, rd.v
		}
	}
	return hr
}

// HolderWaitSuccessor waits until a later holder of the lock wrote.
func (w *MultiWorkload) HolderWaitSuccessor(ctx context.Context, state any) bool {
	return w.waitNewer(ctx, []distlock.Token{state.(*holderReads).tok})
}

// HolderResumed makes the resumed holder write what it read plus one,
// through HTTP with its (now stale) token, one register at a time.
func (w *MultiWorkload) HolderResumed(ctx context.Context, env *Env, hd *integration.Holder, state any) {
	hr := state.(*holderReads)
	for _, r := range w.regs[hr.tok.Name] {
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

// Check implements Workload: the register checks of every name, then
// the lock checks of every name, then the tokens' check.
func (w *MultiWorkload) Check(env *Env, ops []Op) []Check {
	var out []Check
	for _, l := range w.locks {
		for _, r := range w.regs[l] {
			for _, c := range []Check{
				checkLinearizable(env, ops, r.Name()),
				checkTokensIncrease(r.Name(), r.admitted.sorted()),
				checkNoStale(ops, r.Name()),
			} {
				c.Control = !r.Fenced()
				out = append(out, c)
			}
		}
	}
	out = append(out,
		eachLock(w.locks, ops, func(ops []Op) Check { return checkExclusion(workersOnly(ops), "lock") }),
		eachLock(w.locks, ops, checkLostFirst),
		eachLock(w.locks, ops, checkForcedExpiry),
		checkMultiTokens(ops),
	)
	return out
}

// workersOnly leaves out the acquisitions of the paused child holders:
// stopped, a holder cannot be told it lost its lock before a successor
// takes it (as checkLostFirst, exclusion leaves them to the fences).
func workersOnly(ops []Op) []Op {
	var out []Op
	for _, op := range ops {
		if op.Kind == KindAcquire && strings.HasPrefix(op.Process, "holder") {
			continue
		}
		out = append(out, op)
	}
	return out
}

// checkMultiTokens checks that every multi-lock acquisition got one token
// per name, sorted by name, all of one sequence and owner (the worker
// records what was wrong as the acquisition's error).
func checkMultiTokens(ops []Op) Check {
	c := Check{Name: "tokens-per-name", Subject: "lock"}
	var bad []string
	for _, op := range ops {
		if op.Kind != KindAcquire || op.Outcome != OK || len(op.Locks) == 0 {
			continue
		}
		c.Checked++
		if op.Error != "" {
			c.Violations++
			bad = append(bad, fmt.Sprintf("%s %s: %s", op.Process, op.Token, op.Error))
		}
	}
	c.OK = c.Violations == 0
	c.Skipped = c.Checked == 0
	c.Detail = limit(bad)
	return c
}

// eachLock runs check on the history as each lock's queue saw it
// (lockView) and sums the verdicts in one Check, naming each lock in its
// detail. With one lock it runs check on ops as they are.
func eachLock(locks []string, ops []Op, check func([]Op) Check) Check {
	if len(locks) == 1 {
		return check(ops)
	}
	var out Check
	out.OK, out.Skipped = true, true
	var details []string
	for i, l := range locks {
		c := check(lockView(ops, l))
		if i == 0 {
			out.Name, out.Subject, out.Control, out.Timing = c.Name, c.Subject, c.Control, c.Timing
		}
		out.Checked += c.Checked
		out.Violations += c.Violations
		out.OK = out.OK && c.OK
		out.Skipped = out.Skipped && c.Skipped
		if c.Detail != "" {
			details = append(details, short(l)+": "+c.Detail)
		}
	}
	out.Detail = strings.Join(details, " | ")
	return out
}

// holdsLock says whether acquisition op is (or would be) of lock: a
// multi-lock's of its names, or a one-lock acquisition's token's.
func holdsLock(op Op, lock string) bool {
	if len(op.Locks) > 0 {
		return slices.Contains(op.Locks, lock)
	}
	t, err := distlock.ParseToken(op.Token)
	return err == nil && t.Name == lock
}

// tokenOf returns the token of lock of the acquisition whose first token
// is tok (a multi-lock's tokens differ only in their names).
func tokenOf(tok, lock string) string {
	t, err := distlock.ParseToken(tok)
	if err != nil {
		return tok
	}
	t.Name = lock
	return t.String()
}

// lockView returns the history as lock's queue saw it: the acquisitions
// of lock, each with its token of lock, and their releases and losses;
// the reads and writes made with lock's tokens; forced revocations with
// the tokens they name turned into lock's tokens of the same
// acquisitions (revoking one entry of a multi-lock ends the whole
// acquisition); every other fault and event as it is.
func lockView(ops []Op, lock string) []Op {
	type acq struct{ proc, tok string }
	held := map[acq]string{}
	for _, op := range ops {
		if op.Kind == KindAcquire && op.Outcome == OK && holdsLock(op, lock) {
			held[acq{op.Process, op.Token}] = tokenOf(op.Token, lock)
		}
	}
	var out []Op
	for _, op := range ops {
		switch op.Kind {
		case KindAcquire:
			if !holdsLock(op, lock) {
				continue
			}
			if op.Token != "" {
				op.Token = tokenOf(op.Token, lock)
			}
			op.Locks = nil
		case KindRelease, KindLost:
			t, ok := held[acq{op.Process, op.Token}]
			if !ok {
				continue
			}
			op.Token = t
		case KindRead, KindWrite:
			if t, err := distlock.ParseToken(op.Token); err != nil || t.Name != lock {
				continue
			}
		case KindFault:
			if op.Fault == NemRevoke+"/force" && op.Token != "" {
				var ts []string
				for _, t := range strings.Split(op.Token, ",") {
					ts = append(ts, tokenOf(t, lock))
				}
				op.Token = strings.Join(ts, ",")
			}
		}
		out = append(out, op)
	}
	return out
}
