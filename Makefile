# The test command of README.md, run by .ci/run. It installs what the tests
# need: etcd is built from the Go module proxy by the tests themselves
# (in-process clusters through go.etcd.io/etcd/tests/v3, real member
# processes through the harness module, ./integration); ZooKeeper comes from Debian's
# `zookeeper` package, installed here when missing (set ZOOKEEPER_HOME to use
# another installation). The container tests need a running Docker engine.
GO ?= go

# The repository's modules. The root module is the library alone, so that
# a program using it reads a short go.mod (scripts/consumer-modules.sh
# checks it): the harness (integration), the command (cmd), the
# benchmarks (internal/bench), the example programs (examples), the
# embedded etcd (internal/embedetcd) and the library's server-backed
# tests (tests) are modules of their own, each with a replace of the
# others it needs.
MODULES := . internal/embedetcd integration cmd internal/bench examples tests

# The harness's server command, which the root module's tests (Examples,
# the drivers' white-box tests) run through internal/testserve instead of
# importing the harness; built once here instead of once per test binary.
TESTSERVERS := $(CURDIR)/bin/testservers

.PHONY: test check deps bench example demo chaos testservers consumer-modules

# Everything runs with -race, but for the short fault suite's runs
# (TestShort): they reconnect ZooKeeper clients with watches set dozens
# of times a minute, and go-zookeeper v1.0.4 reads Conn.lastZxid in
# sendSetWatches while the new connection's recvLoop writes it (a race in
# the client library, reported upstream: go-zookeeper/zk#35,
# samuel/go-zookeeper#178 and #260), which the race detector reports as a
# failure of whichever test saw it. The suite's own code (history,
# checkers, example) still runs with -race. TestRunCommandKill (distlock
# run itself, SIGKILLed at random; its checker runs with -race as
# TestCheckCommandHistory) goes with TestShort.
#
# One package at a time (-p 1): each server package runs real 3-member
# clusters under the race detector, and two of them at once on a CI machine
# of two CPUs slowed requests to seconds and ended sessions (their TTLs are
# seconds long); alone, each package has the machine to itself.
#
# The modules run one after another, each with -p 1; a module's failure
# does not stop the others, and fails the target at the end.
test: deps check consumer-modules testservers
	@rc=0; for m in $(MODULES); do \
		echo "== module $$m"; \
		pkgs=$$(cd $$m && $(GO) list ./... | grep -v '/integration/chaos$$'); \
		[ -z "$$pkgs" ] || (cd $$m && DISTLOCK_TESTSERVERS=$(TESTSERVERS) $(GO) test -race -p 1 -count=1 -timeout 60m $$pkgs) || rc=1; \
	done; exit $$rc
	cd integration && $(GO) test -race -count=1 -run 'TestCheck|Example' ./chaos
	cd integration && $(GO) test -count=1 -timeout 30m -run '^(TestShort|TestRunCommandKill)$$' ./chaos

testservers:
	$(GO) -C integration build -o $(TESTSERVERS) ./cmd/testservers

# A program importing etcdlock and fencing/etcdfence: how many modules its
# go.sum lists (at most 40).
consumer-modules:
	GO=$(GO) scripts/consumer-modules.sh

# The interop suite's foreign clients (Curator, kazoo, etcdctl): see
# scripts/interop-deps.sh.
#
# PostgreSQL (for fencing/sqlfence) comes from Debian's `postgresql` package;
# the tests run its initdb and postgres themselves (set PG_BINDIR to use
# another installation), so the package is told not to create and start a
# cluster of its own.
deps:
	@if [ -z "$$ZOOKEEPER_HOME" ] && [ ! -f /usr/share/java/zookeeper.jar ]; then \
		echo "installing Debian's zookeeper package"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq zookeeper >/dev/null; \
	fi
	@if [ -z "$$PG_BINDIR" ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		echo "installing Debian's postgresql package"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO mkdir -p /etc/postgresql-common/createcluster.d; \
		echo 'create_main_cluster = false' | $$SUDO tee /etc/postgresql-common/createcluster.d/distlock.conf >/dev/null; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends postgresql >/dev/null; \
	fi
	@command -v java >/dev/null || { echo "java is missing (apt-get install default-jre-headless)"; exit 1; }
	@GO=$(GO) scripts/interop-deps.sh

# gofmt and go vet (every module), failing on any finding.
check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@rc=0; for m in $(MODULES); do echo "go vet: module $$m"; (cd $$m && $(GO) vet ./...) || rc=1; done; exit $$rc

# Every benchmark of internal/bench (the side-by-side comparisons with
# etcd's and go-zookeeper's locks, RW, election failover, footprint, ...),
# BENCH_RUNS times each, on the harness's process clusters. Each run
# appends its numbers as JSON lines to $(BENCH_DIR)/records.jsonl (started
# afresh) and prints its own tables into $(BENCH_DIR)/bench.txt; then the
# report writes docs/bench/results.md and its SVG plots, and the generated
# part of docs/performance.md (between its bench:begin and bench:end
# markers: medians and [min–max] over the runs). The footprint (10,000
# waiters) runs once: it counts goroutines and heap bytes, which do not
# vary from run to run the way times do, and its queues take minutes to
# build. BENCH_QUICK=1 runs fewer iterations, no 32 contenders and no
# 1000-deep queues: for working on the benchmarks, not for publishing.
BENCH_RUNS ?= 3
BENCH_QUICK ?=
BENCH_DIR ?= bench-out
bench: deps
	rm -f $(BENCH_DIR)/records.jsonl
	mkdir -p $(BENCH_DIR)
	{ export BENCH_RECORDS=$(abspath $(BENCH_DIR)/records.jsonl) BENCH_QUICK=$(BENCH_QUICK); \
		$(GO) -C internal/bench test . -run '^$$' -bench '^Benchmark[^F]' -benchtime 1x -count $(BENCH_RUNS) -timeout 4h && \
		$(GO) -C internal/bench test . -run '^$$' -bench '^BenchmarkFootprint$$' -benchtime 1x -count 1 -timeout 1h; \
		echo $$? >$(BENCH_DIR)/rc; } 2>&1 | tee $(BENCH_DIR)/bench.txt; exit $$(cat $(BENCH_DIR)/rc)
	$(GO) -C internal/bench build -o $(CURDIR)/bin/benchreport ./report
	bin/benchreport -in $(BENCH_DIR)/records.jsonl -out docs/bench -doc docs/performance.md $(if $(BENCH_QUICK),-quick)

example:
	cd examples && $(GO) run ./quickstart

# The README's first command: the GC-pause story on an embedded etcd.
demo:
	cd cmd && $(GO) run ./distlock demo

# The long fault suite (integration/chaos): every workload x nemesis x store,
# CHAOS_DURATION of faults each, then a markdown summary. The seed is printed;
# CHAOS_SEED=N replays a run's fault schedule, CHAOS_STORES=etcd|zk and
# CHAOS_SCENARIOS=register/kill,... narrow it down. Histories (JSON lines),
# failed linearizability visualizations and summary.md go to CHAOS_OUT.
CHAOS_DURATION ?= 15s
CHAOS_OUT ?= chaos-out
chaos: deps
	CHAOS_DURATION=$(CHAOS_DURATION) CHAOS_OUT=$(abspath $(CHAOS_OUT)) \
		$(GO) -C integration test -tags chaos -count=1 -timeout 4h -run '^(TestChaos|TestRunCommandKillLong)$$' -v ./chaos
