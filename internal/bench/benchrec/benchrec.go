// Package benchrec is the format in which internal/bench's benchmarks
// emit their numbers and internal/bench/report reads them: one Record per
// JSON line. The benchmarks live in test files, which the report program
// cannot import, so the format lives here, once.
package benchrec

// Record is one number one benchmark run measured.
type Record struct {
	// Bench names the comparison: "mutex", "rw", "semaphore", "multilock",
	// "election", "manylocks", "footprint".
	Bench string `json:"bench"`
	// Store is "etcd" or "zookeeper".
	Store string `json:"store"`
	// Impl is what was measured: "ours" (distlock), "theirs" (the anchor:
	// concurrency.Mutex/Election, zk.Lock), "raw" (the store's own
	// ceiling, e.g. raw put+delete pairs), or "onebyone" (the multi-lock's
	// second anchor: our Mutex taken once per name, in name order).
	Impl string `json:"impl"`
	// Metric names the quantity, e.g. "handoff_p50", "acq_per_s",
	// "requests_per_acq", "heap_per_waiter".
	Metric string `json:"metric"`
	// X is the metric's parameter where it has one (contenders, queue
	// length, distinct names); 0 where it has none.
	X float64 `json:"x,omitempty"`
	// Value is in Unit: "ms", "1/s", "B", "count".
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}
