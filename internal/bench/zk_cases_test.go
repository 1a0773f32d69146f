package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of the ZooKeeper cases; the contended window and the per-call
// timeouts are the etcd comparison's.
var zkUncontendedIters = pick(200, 80)

const (
	zkUncontendedWarmup = 20
	zkUncontendedBudget = 40 * time.Second

	zkQueuedHandoffs = 50 // K: handoffs whose bytes are counted per depth
	zkQueuedQuiet    = 150 * time.Millisecond
	zkQueuedSettle   = 30 * time.Second
	zkQueuedTimeout  = 90 * time.Second // enqueue + settle + the whole drain
	// zkDeepBudget: the deepest queue runs only if the run so far took less.
	zkDeepBudget = 150 * time.Second
)

var (
	zkContendedCounts = pick([]int{2, 8, 32}, []int{2, 8})
	zkQueuedDepths    = pick([]int{10, 500, 1000}, []int{10, 100})
)

// ---- 1. Uncontended ----

type zkUncontendedResult struct {
	server              int
	lock, unlock, cycle []time.Duration
	errs                errList
}

// runUncontended times Lock+Unlock cycles on an idle lock, both
// implementations in the same loop, alternating which goes first, each
// with its own connection to the same follower.
func (e *zkEnv) runUncontended() [2]*zkUncontendedResult {
	const c = "uncontended"
	server := (e.leader + 1) % len(e.ens.Servers)
	var (
		res [2]*zkUncontendedResult
		cs  [2]*zkClient
	)
	for i, im := range zkImpls {
		res[i] = &zkUncontendedResult{server: server}
		got, err := e.openClients(im, c, 1, func(int) int { return server })
		if err != nil {
			res[i].errs.add(err)
			continue
		}
		defer func() { res[i].errs.add(closeClients(got)) }()
		cs[i] = got[0]
	}
	if cs[ours] == nil || cs[theirs] == nil {
		return res
	}
	cycle := func(i int, record bool) {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		h := cs[i].h
		t0 := time.Now()
		if err := h.Lock(ctx); err != nil {
			res[i].errs.add(fmt.Errorf("lock: %w", err))
			return
		}
		t1 := time.Now()
		err := h.Unlock(ctx)
		t2 := time.Now()
		if err != nil {
			res[i].errs.add(fmt.Errorf("unlock: %w", err))
			return
		}
		if record {
			res[i].lock = append(res[i].lock, t1.Sub(t0))
			res[i].unlock = append(res[i].unlock, t2.Sub(t1))
			res[i].cycle = append(res[i].cycle, t2.Sub(t0))
		}
	}
	deadline := time.Now().Add(zkUncontendedBudget)
	for it := 0; it < zkUncontendedWarmup+zkUncontendedIters && time.Now().Before(deadline); it++ {
		first := it % 2
		cycle(first, it >= zkUncontendedWarmup)
		cycle(1-first, it >= zkUncontendedWarmup)
	}
	for i, im := range zkImpls {
		e.progress("uncontended %s: cycle %v; lock %v; unlock %v; errors %v", im.name,
			summarize(res[i].cycle), summarize(res[i].lock), summarize(res[i].unlock), &res[i].errs)
	}
	return res
}

// ---- 2. Contenders looping lock → unlock ----

// runContended has n contenders, each with its own connection (round-robin
// over the servers) and session, lock and immediately unlock in a loop for
// contendedWindow.
// reqs is the requests all contenders wrote in the window, keepalives
// excluded.
func (e *zkEnv) runContended(im zkImpl, n int) (r *contendedResult, reqs int) {
	c := fmt.Sprintf("contended-%d", n)
	r = &contendedResult{contenders: n}
	cs, err := e.openClients(im, c, n, func(i int) int { return i })
	if err != nil {
		r.errs.add(err)
		return r, 0
	}
	defer func() { r.errs.add(closeClients(cs)) }()

	var (
		log acqLog
		wg  sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), contendedWindow)
	defer cancel()
	start := time.Now()
	handles := make([]handle, len(cs))
	for i, cl := range cs {
		handles[i] = cl.h
	}
	contend(ctx, cancel, handles, &log, &r.errs, &wg)
	<-ctx.Done()
	stop := time.Now()
	if !waitTimeout(&wg, stopTimeout) {
		r.errs.add(fmt.Errorf("contenders still running %v after the window", stopTimeout))
	}
	r.elapsed = stop.Sub(start)
	reqs = zkRequests(counters(cs), start, stop)
	left, err := e.countChildren(im.dir(c))
	r.errs.add(err)
	r.leftover = int64(left)

	acqs := log.sorted()
	for _, a := range acqs {
		if !a.lockReturn.After(stop) {
			r.acquisitions++
		}
	}
	hs, raced, violations := handoffs(acqs, zkEnqueueSent(counters(cs)))
	r.violations, r.raced = violations, raced
	r.handoffs = latencies(hs)
	e.progress("%s %s: %d acquisitions in %v (%.1f/s), %d requests; handoffs %v (%d raced); leftover nodes %d; violations %d; errors %v",
		c, im.name, r.acquisitions, r.elapsed.Round(time.Millisecond), r.perSecond(), reqs, summarize(r.handoffs), r.raced, r.leftover, len(r.violations), &r.errs)
	return r, reqs
}

// ---- 3. Deep queues: bytes per handoff, drain rate ----

type zkQueuedResult struct {
	waiters   int
	enqueue   time.Duration // from starting the Lock calls to all nodes visible
	settle    time.Duration // from all nodes visible to no traffic but pings
	build     time.Duration // from starting the Lock calls to the last reply or event before the quiet: every waiter queued and watching
	k         int           // handoffs in the bytes window
	kBytes    int64         // non-ping bytes all connections received during the first k handoffs
	kEvents   int64         // watch notifications they received meanwhile
	kElapsed  time.Duration // release of the holder → k-th Lock return
	drained   int           // handoffs until the queue was empty
	dBytes    int64         // non-ping bytes all connections received from the release until the queue was empty
	kReqs     int           // requests all connections wrote during the first k handoffs, keepalives excluded
	dReqs     int           // the same until the queue was empty
	dSyncs    int64         // Syncs (zklock's keepalives) written from the release until the queue was empty
	partial   bool          // the queue was not drained within zkQueuedTimeout
	drainTime time.Duration // release of the holder → last Lock return
	handoffs  []time.Duration
	leftover  int
	violation []string
	errs      errList
}

func (q *zkQueuedResult) bytesPerHandoff() float64 { return perAcq(int(q.kBytes), q.k) }

func (q *zkQueuedResult) drainBytesPerHandoff() float64 { return perAcq(int(q.dBytes), q.drained) }

func (q *zkQueuedResult) drainRate() float64 {
	if q.drainTime <= 0 {
		return 0
	}
	return float64(q.drained) / q.drainTime.Seconds()
}

func (q *zkQueuedResult) kRate() float64 {
	if q.kElapsed <= 0 {
		return 0
	}
	return float64(q.k) / q.kElapsed.Seconds()
}

// runQueued queues n waiters, each with its own connection and session,
// behind a holder; once all n nodes exist and no connection has received
// anything but pings for zkQueuedQuiet, the holder releases and each
// waiter releases as soon as it acquires, until the queue is empty. Bytes
// are counted over the first K handoffs, while the queue is still nearly
// n deep; the drain rate is over the whole queue.
func (e *zkEnv) runQueued(im zkImpl, n int) *zkQueuedResult {
	c := fmt.Sprintf("queued-%d", n)
	dir := im.dir(c)
	r := &zkQueuedResult{waiters: n, k: min(n, zkQueuedHandoffs)}
	// Client 0 is the holder.
	cs, err := e.openClients(im, c, n+1, func(i int) int { return i })
	if err != nil {
		r.errs.add(err)
		return r
	}
	defer func() { r.errs.add(closeClients(cs)) }()
	ctrs := counters(cs)
	holder, waiters := cs[0].h, cs[1:]

	ctx, cancel := context.WithTimeout(context.Background(), zkQueuedTimeout)
	defer cancel()
	if err := holder.Lock(ctx); err != nil {
		r.errs.add(fmt.Errorf("holder lock: %w", err))
		return r
	}
	first := acquisition{who: -1, lockReturn: time.Now(), token: holder.token()}

	var (
		log      acqLog
		acquired atomic.Int64
		wg       sync.WaitGroup
		kAt      time.Time
		kBytes   int64
		kEvents  int64
	)
	start := time.Now()
	for i, w := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := acquisition{who: i, lockStart: time.Now()}
			if err := w.h.Lock(ctx); err != nil {
				r.errs.add(fmt.Errorf("lock: %w", err))
				return
			}
			a.lockReturn = time.Now()
			a.token = w.h.token()
			// Holders follow each other, so exactly one goroutine sees k,
			// and it is the k-th holder, still holding.
			if acquired.Add(1) == int64(r.k) {
				kAt = a.lockReturn
				kBytes, kEvents = sumBytes(ctrs)
			}
			uctx, ucancel := context.WithTimeout(context.Background(), opTimeout)
			defer ucancel()
			a.unlockStart = time.Now()
			err := w.h.Unlock(uctx)
			a.unlockEnd = time.Now()
			log.add(a)
			if err != nil {
				r.errs.add(fmt.Errorf("unlock: %w", err))
			}
		}()
	}
	if err := e.waitChildren(ctx, dir, n+1); err != nil {
		r.errs.add(err)
	} else {
		r.enqueue = time.Since(start)
		settled := time.Now()
		if last, err := zkQuiet(ctrs, zkQueuedQuiet, zkQueuedSettle); err != nil {
			r.errs.add(fmt.Errorf("waiters not settled: %w", err))
		} else {
			r.build = last.Sub(start)
		}
		r.settle = time.Since(settled)
	}
	b0, ev0 := sumBytes(ctrs)
	s0 := zkSyncs(ctrs)
	uctx, ucancel := context.WithTimeout(context.Background(), opTimeout)
	defer ucancel()
	first.unlockStart = time.Now()
	if err := holder.Unlock(uctx); err != nil {
		r.errs.add(fmt.Errorf("holder unlock: %w", err))
	}
	first.unlockEnd = time.Now()
	if !waitTimeout(&wg, zkQueuedTimeout) {
		r.errs.add(fmt.Errorf("queue not drained %v after the release", zkQueuedTimeout))
		// The goroutines still run: report only what atomics say.
		r.partial, r.drained, r.drainTime = true, int(acquired.Load()), time.Since(first.unlockStart)
		return r
	}
	bEnd, _ := sumBytes(ctrs)
	r.dBytes, r.dSyncs = bEnd-b0, zkSyncs(ctrs)-s0
	acqs := append([]acquisition{first}, log.sorted()...)
	r.drained = len(acqs) - 1
	if r.drained > 0 {
		r.drainTime = acqs[len(acqs)-1].lockReturn.Sub(first.unlockStart)
		r.dReqs = zkRequests(ctrs, first.unlockStart, acqs[len(acqs)-1].unlockEnd)
	}
	if acquired.Load() >= int64(r.k) {
		r.kElapsed = kAt.Sub(first.unlockStart)
		r.kReqs = zkRequests(ctrs, first.unlockStart, kAt)
		r.kBytes, r.kEvents = kBytes-b0, kEvents-ev0
	} else {
		r.k = 0
	}
	hs, _, violations := handoffs(acqs, lockCalled)
	r.violation = violations
	for _, h := range hs[:min(len(hs), r.k)] {
		r.handoffs = append(r.handoffs, h.latency())
	}
	left, err := e.countChildren(dir)
	r.errs.add(err)
	r.leftover = left
	e.progress("%s %s: enqueue %v, built %v, settle %v; %d handoffs: %.0f B/handoff, %.2f events/handoff, %.0f/s; drain %d in %v (%.0f/s); handoffs %v; leftover %d; violations %d; errors %v",
		c, im.name, r.enqueue.Round(time.Millisecond), r.build.Round(time.Millisecond), r.settle.Round(time.Millisecond), r.k, r.bytesPerHandoff(),
		perAcq(int(r.kEvents), r.k), r.kRate(), r.drained, r.drainTime.Round(time.Millisecond), r.drainRate(),
		summarize(r.handoffs), r.leftover, len(r.violation), &r.errs)
	return r
}
