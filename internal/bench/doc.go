// Package bench holds the side-by-side benchmarks of distlock's locks and
// elections against etcd's concurrency package and go-zookeeper's zk.Lock,
// and the benchmarks of what distlock's own primitives cost. Everything
// lives in its tests; `make bench` runs them all several times and reports
// (see internal/bench/report), or run one with
//
//	go -C internal/bench test . -run '^$' -bench BenchmarkCompare -benchtime 1x -timeout 20m
//
// Each starts the integration harness's process clusters (3 etcd members,
// 3 ZooKeeper servers), measures both implementations on them in the same
// run, prints a markdown table (BenchmarkCompare also writes it to the file
// named by $BENCH_OUT, if set) and appends its key numbers as Records to
// the file named by $BENCH_RECORDS, if set. BENCH_QUICK=1 shortens them.
// Add -v for progress and per-run details on stderr.
package bench
