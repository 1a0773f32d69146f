#!/usr/bin/env bash
# Counts the modules a program that imports only etcdlock and
# fencing/etcdfence gets in its go.sum, and fails above MAX (40): the
# root module's go.mod is what every user's build reads, so the test
# harness, the command and the benchmarks live in modules of their own.
# The program is a temporary module whose go.mod replaces distlock with
# this checkout. go mod tidy also records what the tests of the packages
# it imports need (go test all), so the root's own tests count too: keep
# the ones that need the harness in the tests module.
set -euo pipefail
MAX=${MAX:-40}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/main.go" <<'GO'
package main

import (
	_ "github.com/distlock/distlock/etcdlock"
	_ "github.com/distlock/distlock/fencing/etcdfence"
)

func main() {}
GO
cat >"$tmp/go.mod" <<GO
module example.com/consumer

go $(awk '$1 == "go" {print $2}' "$root/go.mod")

require github.com/distlock/distlock v0.0.0

replace github.com/distlock/distlock => $root
GO
(cd "$tmp" && GOFLAGS=-mod=mod ${GO:-go} mod tidy)
n=$(awk '{print $1}' "$tmp/go.sum" | sort -u | wc -l)
echo "consumer of etcdlock and fencing/etcdfence: $n modules in go.sum (at most $MAX)"
if [ "$n" -gt "$MAX" ]; then
	echo "too many; they are:"
	awk '{print $1}' "$tmp/go.sum" | sort -u
	exit 1
fi
