package bench

import (
	"encoding/json"
	"os"
	"sync"
	"testing"

	"github.com/distlock/distlock/internal/bench/benchrec"
)

// Record is one number one benchmark run measured. Every benchmark of this
// package emits its results as Records (besides printing its own table), so
// that `make bench` can run each benchmark several times and report
// medians, ranges, ratios and plots from one file of JSON lines
// (internal/bench/report reads it).
type Record = benchrec.Record

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
