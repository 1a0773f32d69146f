// Package bench holds the side-by-side benchmark of etcdlock.Mutex and
// etcd's concurrency.Mutex. Everything lives in its tests; run it with
//
//	go test ./internal/bench -run '^$' -bench BenchmarkCompare -benchtime 1x -timeout 20m
//
// It starts a 3-member etcd cluster in the test process, measures both
// mutexes on that cluster in the same run, and prints a markdown table (also
// written to the file named by $BENCH_OUT, if set). Add -v for progress and
// per-run details on stderr.
package bench
