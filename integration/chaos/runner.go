package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Workload is what the workers do, and how their history is checked.
type Workload interface {
	// Name names the workload in the summary.
	Name() string
	// Setup prepares the workload's shared state.
	Setup(ctx context.Context, env *Env) error
	// Worker runs worker i until ctx ends, recording its operations.
	// It closes its sessions before it returns.
	Worker(ctx context.Context, env *Env, i int)
	// Check checks the history (faults included) once everything healed.
	Check(env *Env, ops []Op) []Check
	// Close releases what Setup made.
	Close() error
}

// Nemesis injects one kind of fault.
type Nemesis interface {
	// Name names the fault in histories and the summary.
	Name() string
	// Applies says whether the fault can run against env's store and
	// workload.
	Applies(env *Env) bool
	// Inject starts the fault and returns the function that heals it.
	// The target is the server or process hit, for the history.
	Inject(ctx context.Context, env *Env) (target string, heal func(context.Context) error, err error)
}

// Check is one checker's verdict.
type Check struct {
	// Name names the checker ("linearizable", "tokens-increase", ...).
	Name string `json:"name"`
	// Subject is what was checked ("memory", "unfenced", "lock").
	Subject string `json:"subject,omitempty"`
	// Control marks checks of the unfenced control: they are expected
	// to fail under holder pauses.
	Control bool `json:"control,omitempty"`
	// Timing marks checkers that bound a duration (liveness): on a
	// loaded machine they say more about the machine than the lock.
	Timing bool `json:"timing,omitempty"`
	// OK is the verdict; Skipped means the checker had nothing to check.
	OK      bool `json:"ok"`
	Skipped bool `json:"skipped,omitempty"`
	// Checked counts what the checker looked at; Violations what failed.
	Checked    int `json:"checked"`
	Violations int `json:"violations"`
	// Detail says what was seen, the first violations first.
	Detail string `json:"detail,omitempty"`
}

func (c Check) String() string {
	verdict := "ok"
	switch {
	case c.Skipped:
		verdict = "skipped"
	case !c.OK:
		verdict = "VIOLATED"
	}
	s := c.Name
	if c.Subject != "" {
		s += "[" + c.Subject + "]"
	}
	return fmt.Sprintf("%s: %s (%d checked, %d violations) %s", s, verdict, c.Checked, c.Violations, c.Detail)
}

// Config describes one run.
type Config struct {
	// Store is Etcd or ZooKeeper.
	Store string
	// Workload runs during the run (default: the register workload).
	Workload Workload
	// Nemeses are the faults drawn from (none: a fault-free run).
	Nemeses []Nemesis
	// Combine lets the schedule inject two faults at once, sometimes.
	Combine bool
	// Workers is the number of in-process workers (default 3).
	Workers int
	// Duration is how long the workers run under faults (default 20s).
	Duration time.Duration
	// Seed drives every random choice (0: one is drawn and printed).
	Seed uint64
	// Out is the folder the history and verdicts are written to (none
	// if empty).
	Out string
	// Name names the run in the summary and its files (default:
	// store-workload-nemeses).
	Name string
	// FaultMin and FaultMax bound how long a fault lasts (default TTL/2
	// and 2 × TTL of the store's sessions).
	FaultMin, FaultMax time.Duration
	// Logger logs the run (silent if nil).
	Logger *slog.Logger
	// Cluster, if set, is used instead of starting one (it is not closed).
	Cluster Store
}

// Env is what a run shares with its workload and nemeses.
type Env struct {
	Store   Store
	History *History
	// Lock is the name of the lock under test.
	Lock string
	// Clients are the workers' clients, one each.
	Clients []Client
	Log     *slog.Logger
	// Out is the run's output folder ("" for none).
	Out string

	workload Workload
	runName  string

	mu     sync.Mutex
	rng    *rand.Rand // the nemesis schedule's: replayed by the seed
	wrng   *rand.Rand // the workers'
	holder int        // worker holding the lock, -1 if none known
}

// Rand returns a random number in [0, n) from the run's seeded source.
func (e *Env) Rand(n int) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rng.IntN(n)
}

// RandDuration returns a random duration in [lo, hi).
func (e *Env) RandDuration(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return lo + time.Duration(e.rng.Int64N(int64(hi-lo)))
}

// WorkerRand returns a random duration in [lo, hi) for workers, from a
// source of their own, so that their timing does not change the nemesis
// schedule a seed replays.
func (e *Env) WorkerRand(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return lo + time.Duration(e.wrng.Int64N(int64(hi-lo)))
}

// SetHolder tells nemeses which worker holds the lock (-1: none).
func (e *Env) SetHolder(i int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.holder = i
}

// Holder returns the worker that holds the lock, or a random one.
func (e *Env) Holder() int {
	e.mu.Lock()
	h := e.holder
	e.mu.Unlock()
	if h < 0 {
		return e.Rand(len(e.Clients))
	}
	return h
}

// lockNamer is a workload whose workers lock several names (the
// multi-lock workload) rather than Env.Lock alone.
type lockNamer interface {
	lockNames() []string
}

// Locks returns the names of the locks the workload's workers take:
// Env.Lock, or a multi-lock workload's pool of names.
func (e *Env) Locks() []string {
	if ln, ok := e.workload.(lockNamer); ok {
		if names := ln.lockNames(); len(names) > 0 {
			return names
		}
	}
	return []string{e.Lock}
}

// targetLock returns the lock a nemesis aims at: Env.Lock, or one of a
// multi-lock workload's names drawn from the run's seed.
func (e *Env) targetLock() string {
	ls := e.Locks()
	if len(ls) == 1 {
		return ls[0]
	}
	return ls[e.Rand(len(ls))]
}

// Result is what a run saw.
type Result struct {
	Name     string        `json:"name"`
	Store    string        `json:"store"`
	Workload string        `json:"workload"`
	Nemeses  []string      `json:"nemeses"`
	Seed     uint64        `json:"seed"`
	Duration time.Duration `json:"duration"`
	// Ops counts the workload's operations (faults excluded), by
	// outcome.
	Ops  int `json:"ops"`
	OKs  int `json:"oks"`
	Infs int `json:"infos"`
	// Lost counts the acquisitions that ended lost (Done without
	// Unlock), paused child holders included.
	Lost int `json:"lost"`
	// Faults counts the faults injected, by name.
	Faults map[string]int `json:"faults"`
	Checks []Check        `json:"checks"`
	// History is where the history was written.
	History string `json:"history,omitempty"`
	ops     []Op
}

// OK reports whether every check that is not a control passed. Timing
// checks count unless ignoreTiming.
func (r *Result) OK(ignoreTiming bool) bool {
	for _, c := range r.Checks {
		if c.Control || (ignoreTiming && c.Timing) {
			continue
		}
		if !c.OK {
			return false
		}
	}
	return true
}

// Failed returns the checks that failed, controls included.
func (r *Result) Failed() []Check {
	var out []Check
	for _, c := range r.Checks {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}

// Ops returns the run's history.
func (r *Result) HistoryOps() []Op { return r.ops }

// NewSeed draws a seed from the clock.
func NewSeed() uint64 { return uint64(time.Now().UnixNano()) }

// Run runs cfg: starts the cluster (unless given), the workers and the
// nemesis schedule; heals everything; lets the workers finish; checks the
// history and writes it to cfg.Out.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Workload == nil {
		cfg.Workload = &RegisterWorkload{}
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 3
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 20 * time.Second
	}
	if cfg.Seed == 0 {
		cfg.Seed = NewSeed()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	var names []string
	for _, n := range cfg.Nemeses {
		names = append(names, n.Name())
	}
	if cfg.Name == "" {
		ns := "none"
		switch {
		case len(names) > 3:
			ns = "mixed"
		case len(names) > 0:
			ns = strings.Join(names, "+")
		}
		cfg.Name = fmt.Sprintf("%s-%s-%s", cfg.Store, cfg.Workload.Name(), ns)
	}
	log := cfg.Logger.With("run", cfg.Name, "seed", cfg.Seed)
	log.Info("chaos: run starting", "duration", cfg.Duration)
	fmt.Fprintf(os.Stderr, "chaos: %s: seed %d (rerun: CHAOS_SEED=%d)\n", cfg.Name, cfg.Seed, cfg.Seed)

	store := cfg.Cluster
	if store == nil {
		sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		s, err := StartStore(sctx, cfg.Store, log)
		cancel()
		if err != nil {
			return nil, err
		}
		defer s.Close()
		store = s
	}
	env := &Env{
		Store:    store,
		History:  NewHistory(),
		Lock:     fmt.Sprintf("chaos/%s-%d", sanitize(cfg.Workload.Name()), cfg.Seed%1000000),
		Log:      log,
		Out:      cfg.Out,
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		wrng:     rand.New(rand.NewPCG(cfg.Seed^0x5bd1e995, cfg.Seed)),
		holder:   -1,
		workload: cfg.Workload,
		runName:  cfg.Name,
	}
	if cfg.Out != "" {
		if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
			return nil, err
		}
	}
	for range cfg.Workers {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		c, err := store.NewClient(cctx)
		cancel()
		if err != nil {
			return nil, err
		}
		env.Clients = append(env.Clients, c)
	}
	if err := cfg.Workload.Setup(ctx, env); err != nil {
		return nil, err
	}
	defer cfg.Workload.Close()

	wctx, stopWorkers := context.WithCancel(ctx)
	var workers sync.WaitGroup
	for i := range cfg.Workers {
		workers.Go(func() { cfg.Workload.Worker(wctx, env, i) })
	}

	faults := schedule(ctx, env, cfg)

	// Every fault is healed: wait for a healthy cluster, then give the
	// workers time to show the lock is live again.
	hctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err := store.Faults().WaitHealthy(hctx)
	cancel()
	if err != nil {
		stopWorkers()
		workers.Wait()
		return nil, fmt.Errorf("chaos: %s: cluster not healthy after healing: %w", cfg.Name, err)
	}
	healed := env.History.Event(Op{Process: "nemesis", Kind: KindFault, Fault: "healed-all", Outcome: OK})
	// The workers go on until one acquired after the heal (and a second
	// more), or for 2 × TTL + 5s.
	recovery := time.Now().Add(2*store.TTL() + 5*time.Second)
	for time.Now().Before(recovery) && ctx.Err() == nil && !acquiredSince(env.History, healed.Invoke) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	stopWorkers()
	workers.Wait()

	// Once every session is closed, no entry may be left.
	orphans := env.History.Invoke(Op{Process: "checker", Kind: KindOrphans})
	left, err := waitNoEntries(ctx, env, 3*store.TTL())
	env.History.Update(orphans, func(o *Op) { o.Value = int64(len(left)); o.Target = strings.Join(left, " ") })
	env.History.Complete(orphans, map[bool]Outcome{true: OK, false: Info}[err == nil], err)

	ops := env.History.Ops()
	res := &Result{
		Name: cfg.Name, Store: cfg.Store, Workload: cfg.Workload.Name(), Nemeses: names,
		Seed: cfg.Seed, Duration: cfg.Duration, Faults: faults, ops: ops,
	}
	for _, op := range ops {
		if op.Process == "nemesis" || op.Process == "checker" {
			continue
		}
		res.Ops++
		if op.Kind == KindLost {
			res.Lost++
		}
		switch op.Outcome {
		case OK:
			res.OKs++
		case Info:
			res.Infs++
		}
	}
	res.Checks = cfg.Workload.Check(env, ops)
	res.Checks = append(res.Checks, checkLiveness(env, ops, healed.Invoke, 2*store.TTL()))
	res.Checks = append(res.Checks, checkOrphans(ops))
	res.Checks = append(res.Checks, checkGrantAfterRevoke(ops))
	res.Checks = append(res.Checks, checkFaultsInjected(ops))
	if len(cfg.Nemeses) == 0 {
		res.Checks = append(res.Checks, eachLock(env.Locks(), ops, checkFIFO))
	}
	if cfg.Out != "" {
		res.History = filepath.Join(cfg.Out, cfg.Name+".jsonl")
		if err := WriteJSONL(res.History, ops); err != nil {
			return res, err
		}
	}
	for _, c := range res.Checks {
		log.Info("chaos: check", "check", c.String())
	}
	return res, nil
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(s))
}

// schedule injects faults until cfg.Duration has passed, then heals
// them all. It returns how many of each were injected.
func schedule(ctx context.Context, env *Env, cfg Config) map[string]int {
	counts := map[string]int{}
	var usable []Nemesis
	for _, n := range cfg.Nemeses {
		if n.Applies(env) {
			usable = append(usable, n)
		}
	}
	deadline := time.Now().Add(cfg.Duration)
	ttl := env.Store.TTL()
	hold := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	sleep := func(d time.Duration) {
		if r := time.Until(deadline); d > r {
			d = max(r, 0)
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	lo, hi := ttl/2, 2*ttl
	if cfg.FaultMin > 0 {
		lo = cfg.FaultMin
	}
	if cfg.FaultMax > 0 {
		hi = cfg.FaultMax
	}
	// A quiet start: the workers get going before the first fault.
	sleep(env.RandDuration(lo/2, hi/2))
	// At least one fault, however short the run.
	for first := true; len(usable) > 0 && (first || time.Now().Before(deadline)) && ctx.Err() == nil; first = false {
		k := 1
		if cfg.Combine && len(usable) > 1 && env.Rand(4) == 0 {
			k = 2
		}
		picked := map[int]bool{}
		type active struct {
			op   *Op
			heal func(context.Context) error
		}
		var act []active
		for len(picked) < k {
			i := env.Rand(len(usable))
			if picked[i] {
				continue
			}
			picked[i] = true
			n := usable[i]
			op := env.History.Invoke(Op{Process: "nemesis", Kind: KindFault, Fault: n.Name()})
			ictx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			target, heal, err := n.Inject(ictx, env)
			cancel()
			env.History.Update(op, func(o *Op) { o.Target = target })
			if err != nil {
				env.Log.Warn("chaos: fault not injected", "fault", n.Name(), "err", err)
				env.History.Complete(op, Fail, err)
				continue
			}
			counts[n.Name()]++
			env.Log.Info("chaos: fault injected", "fault", n.Name(), "target", target)
			act = append(act, active{op, heal})
		}
		hold(env.RandDuration(lo, hi))
		for _, a := range act {
			hctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			err := a.heal(hctx)
			cancel()
			if err != nil {
				env.Log.Warn("chaos: heal failed", "fault", a.op.Fault, "err", err)
			}
			env.History.Complete(a.op, map[bool]Outcome{true: OK, false: Info}[err == nil], err)
		}
		sleep(env.RandDuration(lo/2, hi/2))
	}
	if len(usable) == 0 {
		sleep(cfg.Duration)
	}
	return counts
}

// waitNoEntries polls the locks' queues until they are empty or d passes
// (sessions closed by their owners are gone at once; those that died with
// a fault go when the store expires them).
func waitNoEntries(ctx context.Context, env *Env, d time.Duration) ([]string, error) {
	deadline := time.Now().Add(d)
	var left []string
	var err error
	for {
		left, err = nil, nil
		for _, lock := range env.Locks() {
			qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			l, lerr := env.Clients[0].Entries(qctx, lock)
			cancel()
			left, err = append(left, l...), cmp.Or(err, lerr)
		}
		if err == nil && len(left) == 0 {
			return nil, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err == nil {
				err = errors.New("entries left")
			}
			return left, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// acquiredSince reports whether an acquisition completed at or after t.
func acquiredSince(h *History, t int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.ops) - 1; i >= 0; i-- {
		op := h.ops[i]
		if op.Kind == KindAcquire && op.Outcome == OK && op.Complete >= t {
			return true
		}
	}
	return false
}
