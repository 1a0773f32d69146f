package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/version"
)

var etcdVersion = "v" + version.Version

// BenchmarkCompare runs the whole comparison once, whatever b.N: it takes
// minutes, so the testing package never asks for a second run, and one run
// already holds thousands of samples. Use -benchtime 1x.
func BenchmarkCompare(b *testing.B) {
	// An absolute path, so that the file lands where the caller meant
	// whatever directory the test binary runs in.
	out := os.Getenv("BENCH_OUT")
	if out != "" {
		abs, err := filepath.Abs(out)
		if err != nil {
			b.Fatal(err)
		}
		out = abs
	}
	verifying := etcdVerify(b)
	began := time.Now()
	e := newEnv(b)
	r := &report{started: began, leader: e.leader, verifying: verifying,
		contended: map[int][2]*contendedResult{}, queued: map[int][2]*queuedResult{}}

	e.progress("cluster up in %v, leader is member %d", time.Since(began).Round(time.Millisecond), e.leader)
	// elections notes each case during which a leader election happened.
	elections := func(c string, run func()) {
		before := e.term()
		run()
		if after := e.term(); after != before {
			r.elections = append(r.elections, fmt.Sprintf("%s (term %d → %d)", c, before, after))
			e.progress("leader election during %s: term %d → %d", c, before, after)
		}
	}
	elections("uncontended", func() { r.uncontended = e.runUncontended() })

	// Each case flips which implementation runs first, so that neither
	// always inherits the other's leftovers (compactions, caches, GC debt).
	turn := 0
	order := func() [2]int {
		turn++
		if turn%2 == 1 {
			return [2]int{ours, theirs}
		}
		return [2]int{theirs, ours}
	}
	for _, n := range contendedCounts {
		var pair [2]*contendedResult
		for _, i := range order() {
			elections(fmt.Sprintf("contended-%d %s", n, impls[i].name), func() { pair[i] = e.runContended(impls[i], n) })
		}
		r.contended[n] = pair
	}
	for _, n := range queuedDepths {
		var pair [2]*queuedResult
		for _, i := range order() {
			elections(fmt.Sprintf("queued-%d %s", n, impls[i].name), func() { pair[i] = e.runQueued(impls[i], n) })
		}
		r.queued[n] = pair
	}
	r.elapsed = time.Since(began)
	r.stray = strayGoroutines(func(g string) bool {
		return strings.Contains(g, "github.com/distlock/distlock") || strings.Contains(g, "go.etcd.io/etcd/client/v3/concurrency")
	})

	emit(b, r.records()...)
	table := r.markdown()
	fmt.Println(table)
	fmt.Println(r.details())
	if out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			b.Error(err)
		}
	}
	for i, suffix := range [2]string{"ours", "theirs"} {
		b.ReportMetric(float64(summarize(r.contended[2][i].handoffs).p50)/1e6, "handoff2-p50-ms-"+suffix)
		b.ReportMetric(r.contended[2][i].perSecond(), "acq/s-2-"+suffix)
	}
}

// strayGoroutines returns the stacks of goroutines, matched by match, still
// running code of either lock library once every case has closed its
// sessions and clients:
// anything there outlived Close. It waits a little first, since goroutines
// told to stop may need a moment to return.
func strayGoroutines(match func(stack string) bool) []string {
	var stray []string
	for range 20 {
		buf := make([]byte, 8<<20)
		buf = buf[:runtime.Stack(buf, true)]
		stray = stray[:0]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if match(g) && !strings.Contains(g, "internal/bench.strayGoroutines") {
				stray = append(stray, g)
			}
		}
		if len(stray) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return stray
}
