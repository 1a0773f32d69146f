package bench

import (
	"encoding/json"
	"os"
	"sync"
	"testing"
)

// Record is one number one benchmark run measured. Every benchmark of this
// package emits its results as Records (besides printing its own table), so
// that `make bench` can run each benchmark several times and report
// medians, ranges, ratios and plots from one file of JSON lines
// (internal/bench/report reads it).
type Record struct {
	// Bench names the comparison: "mutex", "rw", "election", "manylocks",
	// "footprint".
	Bench string `json:"bench"`
	// Store is "etcd" or "zookeeper".
	Store string `json:"store"`
	// Impl is what was measured: "ours" (distlock), "theirs" (the anchor:
	// concurrency.Mutex/Election, zk.Lock), or "raw" (the store's own
	// ceiling, e.g. raw put+delete pairs).
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

var recordMu sync.Mutex

// emit appends recs, one JSON object per line, to the file named by
// $BENCH_RECORDS (an absolute path: some benchmarks change directory); it
// does nothing when that is not set.
func emit(tb testing.TB, recs ...Record) {
	path := os.Getenv("BENCH_RECORDS")
	if path == "" || len(recs) == 0 {
		return
	}
	recordMu.Lock()
	defer recordMu.Unlock()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		tb.Errorf("bench records: %v", err)
		return
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			tb.Errorf("bench records: %v", err)
			return
		}
	}
}
