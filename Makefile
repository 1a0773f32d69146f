# The test command of README.md, run by .ci/run. It needs only Go: the etcd
# clusters of the tests run in-process (go.etcd.io/etcd/tests/v3), built from
# the Go module proxy like any dependency.
GO ?= go

.PHONY: test check bench example

test: check
	$(GO) test -race -count=1 -timeout 30m ./...

# gofmt and go vet, failing on any finding.
check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# The side-by-side benchmark against etcd's concurrency.Mutex (see README).
bench:
	$(GO) test ./internal/bench -run '^$$' -bench BenchmarkCompare -benchtime 1x -timeout 30m

example:
	$(GO) run ./examples/quickstart
