package bench

import (
	"time"
)

// implNames are the Record.Impl values, indexed by ours and theirs.
var implNames = [2]string{ours: "ours", theirs: "theirs"}

// recs builds the Records of one benchmark and store.
type recs struct {
	bench, store string
	out          []Record
}

func (r *recs) add(impl, metric string, x, value float64, unit string) {
	r.out = append(r.out, Record{Bench: r.bench, Store: r.store, Impl: impl, Metric: metric, X: x, Value: value, Unit: unit})
}

// latencies adds metric_p50 and metric_p99 of ds in ms; nothing when ds is
// empty, so that a case that measured nothing does not pull a median to 0.
func (r *recs) latencies(impl, metric string, x float64, ds []time.Duration) {
	l := summarize(ds)
	if l.n == 0 {
		return
	}
	r.add(impl, metric+"_p50", x, msFloat(l.p50), "ms")
	r.add(impl, metric+"_p99", x, msFloat(l.p99), "ms")
}

// ratioOf adds n/of as a count, unless of is 0.
func (r *recs) ratioOf(impl, metric string, x float64, n, of int) {
	if of > 0 {
		r.add(impl, metric, x, float64(n)/float64(of), "count")
	}
}

func msFloat(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// cycles is each Lock+Unlock's total, from two samples taken on the same
// calls.
func cycles(lock, unlock []time.Duration) []time.Duration {
	out := make([]time.Duration, min(len(lock), len(unlock)))
	for i := range out {
		out[i] = lock[i] + unlock[i]
	}
	return out
}

// records is what the etcd comparison emits. Cases during which a leader
// election happened are left out, as the table's footnote says they are
// not comparable.
func (r *report) records() []Record {
	o := &recs{bench: "mutex", store: "etcd"}
	for i, impl := range implNames {
		u := r.uncontended[i]
		o.latencies(impl, "lock", 0, u.lock)
		o.latencies(impl, "unlock", 0, u.unlock)
		o.latencies(impl, "cycle", 0, cycles(u.lock, u.unlock))
	}
	for _, n := range contendedCounts {
		for i, impl := range implNames {
			c, x := r.contended[n][i], float64(n)
			if c.elected || c.acquisitions == 0 {
				continue
			}
			o.latencies(impl, "handoff", x, c.handoffs)
			o.add(impl, "acq_per_s", x, c.perSecond(), "1/s")
			t := c.total
			o.ratioOf(impl, "requests_per_acq", x, t.reads+t.writes+t.watchCreates+t.watchCancels+t.other, c.acquisitions)
			o.ratioOf(impl, "writes_per_acq", x, t.writes, c.acquisitions)
			o.ratioOf(impl, "reads_per_acq", x, t.reads, c.acquisitions)
			o.ratioOf(impl, "watch_creates_per_acq", x, t.watchCreates, c.acquisitions)
			p := c.critical.count
			o.ratioOf(impl, "path_writes_per_handoff", x, p.writes, len(c.handoffs))
			o.ratioOf(impl, "path_reads_per_handoff", x, p.reads, len(c.handoffs))
		}
	}
	for _, n := range queuedDepths {
		for i, impl := range implNames {
			q, x := r.queued[n][i], float64(n)
			if q.elected {
				continue
			}
			o.latencies(impl, "queued_handoff", x, q.handoffs)
			p := q.critical.count
			o.ratioOf(impl, "queued_path_reads_per_handoff", x, p.reads, len(q.handoffs))
			o.ratioOf(impl, "queued_path_watch_creates_per_handoff", x, p.watchCreates, len(q.handoffs))
		}
	}
	return o.out
}

// records is what the ZooKeeper comparison emits.
func (r *zkReport) records() []Record {
	o := &recs{bench: "mutex", store: "zookeeper"}
	for i, impl := range implNames {
		u := r.uncontended[i]
		o.latencies(impl, "lock", 0, u.lock)
		o.latencies(impl, "unlock", 0, u.unlock)
		o.latencies(impl, "cycle", 0, u.cycle)
	}
	for _, n := range zkContendedCounts {
		for i, impl := range implNames {
			c, x := r.contended[n][i], float64(n)
			if c.acquisitions == 0 {
				continue
			}
			o.latencies(impl, "handoff", x, c.handoffs)
			o.add(impl, "acq_per_s", x, c.perSecond(), "1/s")
			o.ratioOf(impl, "requests_per_acq", x, r.contendedReqs[n][i], c.acquisitions)
		}
	}
	for _, n := range r.depths {
		for i, impl := range implNames {
			q, x := r.queued[n][i], float64(n)
			o.latencies(impl, "queued_handoff", x, q.handoffs)
			if q.build > 0 {
				o.add(impl, "queue_build", x, msFloat(q.build), "ms")
			}
			if q.k > 0 && q.kElapsed > 0 {
				o.add(impl, "queued_bytes_per_handoff", x, q.bytesPerHandoff(), "B")
				o.ratioOf(impl, "queued_events_per_handoff", x, int(q.kEvents), q.k)
				o.add(impl, "queued_handoffs_per_s", x, q.kRate(), "1/s")
			}
			// A queue not drained in time has no drain rate to speak of.
			if q.drained > 0 && !q.partial {
				o.add(impl, "drain_bytes_per_handoff", x, q.drainBytesPerHandoff(), "B")
				o.ratioOf(impl, "drain_requests_per_handoff", x, q.dReqs, q.drained)
				o.add(impl, "drain_per_s", x, q.drainRate(), "1/s")
			}
		}
	}
	return o.out
}
