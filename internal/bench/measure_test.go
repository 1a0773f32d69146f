package bench

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// latency summarizes a sample of durations.
type latency struct {
	n                  int
	p50, p90, p99, max time.Duration
}

// summarize uses nearest-rank percentiles: every reported value is one that
// was actually measured.
func summarize(ds []time.Duration) latency {
	if len(ds) == 0 {
		return latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p/100*float64(len(s)))) - 1
		return s[max(i, 0)]
	}
	return latency{n: len(s), p50: rank(50), p90: rank(90), p99: rank(99), max: s[len(s)-1]}
}

func (l latency) String() string {
	if l.n == 0 {
		return "no samples"
	}
	return fmt.Sprintf("n=%d p50=%s p90=%s p99=%s max=%s", l.n, ms(l.p50), ms(l.p90), ms(l.p99), ms(l.max))
}

// ms formats a duration in milliseconds, with more decimals for short ones
// so that sub-millisecond latencies stay readable.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 100:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}

// acquisition is one Lock/Unlock cycle, stamped with the monotonic clock.
type acquisition struct {
	who         int // index of the contender (and of its client); -1 for a queued run's first holder
	lockStart   time.Time
	lockReturn  time.Time
	unlockStart time.Time
	unlockEnd   time.Time
	token       int64 // fencing token, 0 if the implementation has none
}

// acqLog collects acquisitions from all contenders. Each contender appends
// once per cycle, after the cycle, so the lock is never on the timed path.
type acqLog struct {
	mu   sync.Mutex
	acqs []acquisition
}

func (l *acqLog) add(a acquisition) {
	l.mu.Lock()
	l.acqs = append(l.acqs, a)
	l.mu.Unlock()
}

// sorted returns the acquisitions in the order they held the lock.
func (l *acqLog) sorted() []acquisition {
	l.mu.Lock()
	out := slices.Clone(l.acqs)
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b acquisition) int { return a.lockReturn.Compare(b.lockReturn) })
	return out
}

// handoff is the passing of the lock from prev to next, next having been
// waiting when prev started to unlock.
type handoff struct {
	prev, next acquisition
}

func (h handoff) latency() time.Duration { return h.next.lockReturn.Sub(h.prev.unlockStart) }

// handoffs extracts the handoffs from acquisitions in holding order: pairs
// where next was waiting since before prev started to unlock. waiting says
// since when an acquisition's Lock call was waiting; raced counts the pairs
// where Lock had been called but was not waiting yet.
//
// It also checks what a mutex must guarantee, from the outside: holds never
// overlap (next's Lock returned after prev's Unlock started) and fencing
// tokens only grow. Either failing is a safety bug, listed in violations.
func handoffs(acqs []acquisition, waiting func(acquisition) time.Time) (hs []handoff, raced int, violations []string) {
	for i := 1; i < len(acqs); i++ {
		prev, next := acqs[i-1], acqs[i]
		if next.lockReturn.Before(prev.unlockStart) {
			violations = append(violations, fmt.Sprintf("holds overlap: #%d got the lock %s before #%d started to unlock",
				next.who, prev.unlockStart.Sub(next.lockReturn), prev.who))
		}
		if prev.token != 0 && next.token != 0 && next.token <= prev.token {
			violations = append(violations, fmt.Sprintf("token went from %d (#%d) to %d (#%d)", prev.token, prev.who, next.token, next.who))
		}
		if !next.lockStart.Before(prev.unlockStart) {
			continue
		}
		if !waiting(next).Before(prev.unlockStart) {
			raced++
			continue
		}
		hs = append(hs, handoff{prev: prev, next: next})
	}
	return hs, raced, violations
}

// lockCalled counts a Lock call as waiting from the moment it was made.
func lockCalled(a acquisition) time.Time { return a.lockStart }

// enqueueSent counts a Lock call as waiting from its first request, the
// enqueue, for both implementations. A Lock called just before the holder
// unlocks but whose enqueue went out just after was not waiting: it would
// put its own enqueue write on the handoff's path and, when its write lands
// after the release, time an uncontended Lock. counters is indexed by who.
func enqueueSent(counters []*rpcCounter) func(acquisition) time.Time {
	return func(a acquisition) time.Time {
		if t, ok := counters[a.who].firstFrom(a.lockStart); ok {
			return t
		}
		return a.lockReturn // no request at all: it never waited
	}
}

func latencies(hs []handoff) []time.Duration {
	out := make([]time.Duration, len(hs))
	for i, h := range hs {
		out[i] = h.latency()
	}
	return out
}

// criticalPath returns the requests a handoff waited on: those the
// releasing holder issued while unlocking, and those the next holder issued
// between the start of the release and its Lock's return. Requests others
// issued meanwhile (re-enqueues of other contenders) are not on the path.
// counters is indexed by acquisition.who.
func criticalPath(h handoff, counters []*rpcCounter) []rpcEvent {
	return append(counters[h.prev.who].between(h.prev.unlockStart, h.prev.unlockEnd),
		counters[h.next.who].between(h.prev.unlockStart, h.next.lockReturn)...)
}

// errList keeps the number of errors and the first few, for the details.
type errList struct {
	mu    sync.Mutex
	n     int
	first []string
}

func (l *errList) add(err error) {
	if err == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if len(l.first) < 5 {
		l.first = append(l.first, err.Error())
	}
}

func (l *errList) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

func (l *errList) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		return "none"
	}
	return fmt.Sprintf("%d, first: %q", l.n, l.first)
}

// parallel runs f(0) … f(n-1) on at most workers goroutines and returns
// the first error. Opening a thousand sessions one by one would take most
// of the time budget; all at once would measure the server's queueing.
func parallel(n, workers int, f func(i int) error) error {
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		mu    sync.Mutex
		first error
	)
	for range min(n, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// waitTimeout waits for wg, up to d; it reports whether wg finished.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
