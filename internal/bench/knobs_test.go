package bench

import (
	"os"
	"testing"
)

// quick is set by BENCH_QUICK=1 (`make bench BENCH_QUICK=1`): fewer
// iterations, shorter windows, no 32 contenders and no 1000-deep queue,
// so that the whole package runs in a few minutes while the benchmarks or
// the report are worked on. Its numbers are noisier and miss the deep
// cases; they are not the ones to publish.
var quick = os.Getenv("BENCH_QUICK") != ""

// pick returns full, or short when BENCH_QUICK is set.
func pick[T any](full, short T) T {
	if quick {
		return short
	}
	return full
}

// etcdVerify turns on etcd's test-only ETCD_VERIFY checks in the member
// processes (which inherit the environment) when BENCH_ETCD_VERIFY is set,
// and reports whether it did. They are off by default: after every apply
// they walk and diff whole bolt buckets (the lease bucket among them: one
// entry per session) and take stack traces on backend locks, which
// inflates every latency and makes it grow with the number of sessions. It
// must run before the cluster starts.
func etcdVerify(tb testing.TB) bool {
	if os.Getenv("BENCH_ETCD_VERIFY") == "" {
		return false
	}
	tb.Setenv("ETCD_VERIFY", "all")
	return true
}
