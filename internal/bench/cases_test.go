package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Bounds: every loop stops at its count or its time, whichever comes first,
// so that the whole run stays within a few minutes on two cores.
// BENCH_QUICK shortens some (see quick).
var (
	uncontendedIters = pick(300, 100)
	contendedWindow  = pick(5*time.Second, 2*time.Second)
)

const (
	uncontendedWarmup = 20
	uncontendedBudget = 40 * time.Second

	contendedMaxAcq = 50000

	queuedHandoffs     = 50 // K: handoffs measured per queue depth
	queuedMaxClients   = 30 // deeper queues share this many clients
	queuedRoundTimeout = 60 * time.Second
	queuedQuiet        = 100 * time.Millisecond // no request for this long: every waiter is just waiting
	queuedSettleMax    = 20 * time.Second
	queuedBudget       = 90 * time.Second

	opTimeout   = 10 * time.Second // any single Unlock
	stopTimeout = 30 * time.Second // goroutines winding down after a run
)

// ---- 1. Uncontended ----

type uncontendedResult struct {
	member       int
	lock, unlock []time.Duration
	// The requests each call waited on, and everything the client sent
	// while measuring (background work included), for the details.
	lockPath, unlockPath pathStats
	all                  reqCount
	methods              map[string]int
	errs                 errList
}

// runUncontended times Lock and Unlock separately on an otherwise idle
// lock. Both contenders run in the same loop, alternating which goes first,
// so that neither gets a systematically warmer cluster; both use a client
// on the same member (a follower, where most clients of a cluster sit).
func (e *env) runUncontended() [2]*uncontendedResult {
	const c = "uncontended"
	member := (e.leader + 1) % e.members()
	var (
		res      [2]*uncontendedResult
		hs       [2]handle
		counters [2]*rpcCounter
	)
	for i, im := range impls {
		res[i] = &uncontendedResult{member: member}
		counters[i] = newRPCCounter()
		cli, err := e.client(member, counters[i])
		if err != nil {
			e.tb.Fatal(err)
		}
		defer cli.Close()
		h, err := openAll(im, c, []*clientv3.Client{cli}, 1)
		if err != nil {
			e.tb.Fatal(err)
		}
		defer func() { res[i].errs.add(closeAll(h)) }()
		hs[i] = h[0]
	}
	cycle := func(i int, record bool) {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		t0 := time.Now()
		if err := hs[i].Lock(ctx); err != nil {
			res[i].errs.add(fmt.Errorf("lock: %w", err))
			return
		}
		t1 := time.Now()
		err := hs[i].Unlock(ctx)
		t2 := time.Now()
		if err != nil {
			res[i].errs.add(fmt.Errorf("unlock: %w", err))
			return
		}
		if record {
			res[i].lock = append(res[i].lock, t1.Sub(t0))
			res[i].unlock = append(res[i].unlock, t2.Sub(t1))
			res[i].lockPath.add(counters[i].between(t0, t1))
			res[i].unlockPath.add(counters[i].between(t1, t2))
		}
	}
	deadline := time.Now().Add(uncontendedBudget)
	var start time.Time
	for it := 0; it < uncontendedWarmup+uncontendedIters && time.Now().Before(deadline); it++ {
		if it == uncontendedWarmup {
			start = time.Now()
		}
		first := it % 2
		cycle(first, it >= uncontendedWarmup)
		cycle(1-first, it >= uncontendedWarmup)
	}
	// Let background work of the last cycle (a watch cancel) go out: until
	// nothing is pending and 50 ms pass without a request.
	if err := (&clientSet{counters: counters[:]}).quiet(50*time.Millisecond, 10*time.Second); err != nil {
		e.tb.Error(err)
	}
	for i := range impls {
		for _, ev := range counters[i].between(start, time.Now()) {
			res[i].all.add(ev.kind)
		}
		res[i].methods = counters[i].methodCounts()
	}
	for i, im := range impls {
		e.progress("uncontended %s: lock %v; unlock %v; errors %v", im.name, summarize(res[i].lock), summarize(res[i].unlock), &res[i].errs)
	}
	return res
}

// ---- 2, 3, 5. Contenders looping lock → unlock ----

type contendedResult struct {
	contenders   int
	elapsed      time.Duration // from start to the end of the window
	acquisitions int           // Lock calls that returned within the window
	handoffs     []time.Duration
	raced        int       // Lock calls made before the release but enqueued after it: not handoffs
	critical     pathStats // over the handoffs
	total        reqCount  // all requests of the contenders in the window
	methods      map[string]int
	violations   []string
	leftover     int64 // keys under the lock's prefix once every call returned
	elected      bool  // a leader election happened within the window
	errs         errList
}

func (r *contendedResult) perSecond() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.acquisitions) / r.elapsed.Seconds()
}

// runContended has n contenders, each with its own client and session,
// lock and immediately unlock in a loop for a fixed window.
func (e *env) runContended(im impl, n int) *contendedResult {
	c := fmt.Sprintf("contended-%d", n)
	r := &contendedResult{contenders: n}
	cs, err := e.clients(n)
	if err != nil {
		r.errs.add(err)
		return r
	}
	defer cs.close()
	hs, err := openAll(im, c, cs.clis, n)
	if err != nil {
		r.errs.add(err)
		return r
	}
	defer func() { r.errs.add(closeAll(hs)) }()

	var (
		log acqLog
		wg  sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), contendedWindow)
	defer cancel()
	term := e.term()
	start := time.Now()
	contend(ctx, cancel, hs, &log, &r.errs, &wg)
	<-ctx.Done()
	stop := time.Now()
	r.elected = e.term() != term
	if !waitTimeout(&wg, stopTimeout) {
		r.errs.add(fmt.Errorf("contenders still running %v after the window", stopTimeout))
	}
	r.elapsed = stop.Sub(start)
	if r.leftover, err = e.countKeys(im.queuePrefix(c)); err != nil {
		r.errs.add(err)
	}

	acqs := log.sorted()
	for _, a := range acqs {
		if !a.lockReturn.After(stop) {
			r.acquisitions++
		}
	}
	hs2, raced, violations := handoffs(acqs, enqueueSent(cs.counters))
	r.violations, r.raced = violations, raced
	r.handoffs = latencies(hs2)
	for _, h := range hs2 {
		r.critical.add(criticalPath(h, cs.counters))
	}
	for _, ev := range cs.between(start, stop) {
		r.total.add(ev.kind)
	}
	r.methods = cs.methodCounts()
	e.progress("%s %s: %d acquisitions in %v (%.1f/s); handoffs %v (%d raced); leftover keys %d; violations %d; errors %v",
		c, im.name, r.acquisitions, r.elapsed.Round(time.Millisecond), r.perSecond(), summarize(r.handoffs), r.raced, r.leftover, len(r.violations), &r.errs)
	return r
}

// ---- 4. Deep queues ----

type queuedResult struct {
	waiters, clients int
	rounds           int
	enqueue          []time.Duration // per round: from starting the Lock calls to all keys visible
	settle           []time.Duration // per round: from all keys visible to all waiters set up (see clientSet.quiet)
	handoffs         []time.Duration
	critical         pathStats // all clients' requests during the handoffs
	violations       []string
	leftover         int64 // max over rounds, once every call of the round returned
	elected          bool  // a leader election happened while handoffs were measured
	errs             errList
}

// runQueued queues n waiters behind a holder, each Lock in its own
// goroutine and with its own session, waits until all n keys are in etcd,
// then releases the holder; each waiter unlocks as soon as it acquires. The
// first handoffs are measured while the queue is still nearly n deep, then
// the remaining waiters are cancelled. A queue shorter than K gives fewer
// handoffs per round, so rounds repeat until K are measured.
func (e *env) runQueued(im impl, n int) *queuedResult {
	c := fmt.Sprintf("queued-%d", n)
	r := &queuedResult{waiters: n, clients: min(n, queuedMaxClients)}
	cs, err := e.clients(r.clients)
	if err != nil {
		r.errs.add(err)
		return r
	}
	defer cs.close()
	// Handle 0 is the holder, the others are the waiters; handle i uses
	// client i mod the number of clients.
	hs, err := openAll(im, c, cs.clis, n+1)
	if err != nil {
		r.errs.add(err)
		return r
	}
	defer func() { r.errs.add(closeAll(hs)) }()

	deadline := time.Now().Add(queuedBudget)
	for len(r.handoffs) < queuedHandoffs && time.Now().Before(deadline) {
		r.rounds++
		if err := e.queuedRound(im, c, hs, cs, min(n, queuedHandoffs-len(r.handoffs)), r); err != nil {
			r.errs.add(fmt.Errorf("round %d: %w", r.rounds, err))
			break
		}
	}
	e.progress("%s %s: %d rounds, enqueue %v, settle %v, handoffs %v; leftover keys %d; violations %d; errors %v",
		c, im.name, r.rounds, summarize(r.enqueue), summarize(r.settle), summarize(r.handoffs), r.leftover, len(r.violations), &r.errs)
	return r
}

func (e *env) queuedRound(im impl, c string, hs []handle, cs *clientSet, want int, r *queuedResult) error {
	prefix := im.queuePrefix(c)
	holder, waiters := hs[0], hs[1:]
	ctx, cancel := context.WithTimeout(context.Background(), queuedRoundTimeout)
	defer cancel()

	if err := holder.Lock(ctx); err != nil {
		return fmt.Errorf("holder lock: %w", err)
	}
	first := acquisition{who: -1, lockReturn: time.Now(), token: holder.token()}

	// lockCtx ends the waiters' Lock calls once enough handoffs happened.
	lockCtx, stopWaiters := context.WithCancel(ctx)
	defer stopWaiters()
	var (
		log      acqLog
		acquired atomic.Int64
		wg       sync.WaitGroup
	)
	start := time.Now()
	for i, h := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := acquisition{who: i, lockStart: time.Now()}
			if err := h.Lock(lockCtx); err != nil {
				if lockCtx.Err() == nil {
					r.errs.add(fmt.Errorf("lock: %w", err))
				}
				return
			}
			a.lockReturn = time.Now()
			a.token = h.token()
			uctx, ucancel := context.WithTimeout(context.Background(), opTimeout)
			defer ucancel()
			a.unlockStart = time.Now()
			err := h.Unlock(uctx)
			a.unlockEnd = time.Now()
			log.add(a)
			if err != nil {
				r.errs.add(fmt.Errorf("unlock: %w", err))
			}
			if acquired.Add(1) >= int64(want) {
				stopWaiters()
			}
		}()
	}
	err := e.waitKeys(ctx, prefix, int64(len(waiters)+1))
	if err == nil {
		r.enqueue = append(r.enqueue, time.Since(start))
		// A key is visible before its waiter has finished setting up its
		// wait (watches, reads); releasing now would measure that tail
		// instead of the handoff, and count its requests on the path.
		settled := time.Now()
		if err := cs.quiet(queuedQuiet, queuedSettleMax); err != nil {
			r.errs.add(fmt.Errorf("waiters not settled: %w", err))
		}
		r.settle = append(r.settle, time.Since(settled))
	} else {
		stopWaiters()
	}
	uctx, ucancel := context.WithTimeout(context.Background(), opTimeout)
	defer ucancel()
	term := e.term()
	first.unlockStart = time.Now()
	uerr := holder.Unlock(uctx)
	first.unlockEnd = time.Now()
	if err != nil || uerr != nil {
		waitTimeout(&wg, stopTimeout)
		return errors.Join(err, uerr)
	}
	<-lockCtx.Done()
	r.elected = r.elected || e.term() != term
	if !waitTimeout(&wg, stopTimeout) {
		return fmt.Errorf("waiters still running %v after being cancelled", stopTimeout)
	}
	if got := acquired.Load(); got < int64(want) {
		r.errs.add(fmt.Errorf("only %d of %d handoffs before the round timed out", got, want))
	}

	// Every Lock call has returned, so every key should be gone: a failed
	// Lock promises to leave none behind.
	if left, err := e.countKeys(prefix); err != nil {
		r.errs.add(err)
	} else if left > 0 {
		r.leftover = max(r.leftover, left)
		// The next round's holder must find the lock free.
		wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer wcancel()
		if err := e.waitKeys(wctx, prefix, 0); err != nil {
			return err
		}
	}

	// Every waiter enqueued long before the release, so a Lock call counts
	// as waiting from the start. Clients are shared here, so the critical
	// path is every client's requests: nobody else acts while the queue
	// drains.
	acqs := append([]acquisition{first}, log.sorted()...)
	hsOut, _, violations := handoffs(acqs, lockCalled)
	r.violations = append(r.violations, violations...)
	if len(hsOut) > want {
		hsOut = hsOut[:want]
	}
	for _, h := range hsOut {
		r.handoffs = append(r.handoffs, h.latency())
		r.critical.add(cs.between(h.prev.unlockStart, h.next.lockReturn))
	}
	return nil
}

// contend starts, for each handle, a loop that locks and at once unlocks
// until ctx ends, logging every acquisition and cancelling ctx after
// contendedMaxAcq of them in all; wg counts the loops.
func contend(ctx context.Context, cancel context.CancelFunc, hs []handle, log *acqLog, errs *errList, wg *sync.WaitGroup) {
	var count atomic.Int64
	for i, h := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				a := acquisition{who: i, lockStart: time.Now()}
				if err := h.Lock(ctx); err != nil {
					if ctx.Err() == nil {
						errs.add(fmt.Errorf("lock: %w", err))
					}
					return
				}
				a.lockReturn = time.Now()
				a.token = h.token()
				uctx, ucancel := context.WithTimeout(context.Background(), opTimeout)
				a.unlockStart = time.Now()
				err := h.Unlock(uctx)
				a.unlockEnd = time.Now()
				ucancel()
				log.add(a)
				if err != nil {
					errs.add(fmt.Errorf("unlock: %w", err))
					return
				}
				if count.Add(1) >= contendedMaxAcq {
					cancel()
				}
			}
		}()
	}
}
