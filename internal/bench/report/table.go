package main

import (
	"fmt"
	"math"
	"strings"
)

// implLabels names, per benchmark and store, what "ours", "theirs" and
// "raw" are, for headings and legends; unknown ones keep the bare word.
var implLabels = map[string]map[string]string{
	"mutex/etcd":      {"ours": "recipe.Mutex", "theirs": "concurrency.Mutex"},
	"mutex/zookeeper": {"ours": "recipe.Mutex", "theirs": "zk.Lock"},
	"election/etcd":   {"ours": "recipe.Election", "theirs": "concurrency.Election"},
	// The ZooKeeper election's handoff has no go-zookeeper election to
	// compare with: its reference is our own Mutex's Unlock, a row.
	"election/zookeeper": {"ours": "recipe.Election"},
	// The telemetry benchmark compares our lock with itself: with the
	// OpenTelemetry SDK installed, and with none (the global providers).
	"telemetry/etcd":      {"ours": "SDK, no-op exporter", "theirs": "no SDK"},
	"telemetry/zookeeper": {"ours": "SDK, no-op exporter", "theirs": "no SDK"},
	// The multi-lock benchmark has a second anchor of our own: our Mutex
	// taken once per name, in name order.
	"multilock/etcd":      {"ours": "recipe.MultiMutex", "onebyone": "recipe.Mutex ×K in order", "theirs": "concurrency.Mutex ×K in order"},
	"multilock/zookeeper": {"ours": "recipe.MultiMutex", "onebyone": "recipe.Mutex ×K in order", "theirs": "zk.Lock ×K in order"},
}

func implLabel(bench, store, impl string) string {
	if l, ok := implLabels[bench+"/"+store][impl]; ok {
		return impl + " (" + l + ")"
	}
	return impl
}

// formatValue renders v in unit with as many digits as its size needs.
func formatValue(v float64, unit string) string {
	num := formatNumber(v, unit)
	switch unit {
	case "ms":
		return num + " ms"
	case "1/s":
		return num + "/s"
	case "B":
		return num + " B"
	case "count", "":
		return num
	}
	return num + " " + unit
}

func formatNumber(v float64, unit string) string {
	a := math.Abs(v)
	switch {
	case unit == "count" && a < 100:
		return fmt.Sprintf("%.2f", v)
	case a == 0:
		return "0"
	case a < 10:
		return fmt.Sprintf("%.2f", v)
	case a < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// cell renders a series as "median [min–max]", noting the number of runs
// when it differs from the others' (a case skipped in some runs).
func cell(s stat, ok bool, runs int) string {
	if !ok {
		return "—"
	}
	out := formatValue(s.Median, s.Unit)
	if s.N > 1 {
		out += fmt.Sprintf(" [%s–%s]", formatNumber(s.Min, s.Unit), formatNumber(s.Max, s.Unit))
	}
	if s.N != runs {
		out += fmt.Sprintf(" (n=%d)", s.N)
	}
	return out
}

func ratioCell(v float64, ok bool) string {
	if !ok {
		return "—"
	}
	return fmt.Sprintf("%.2f×", v)
}

func formatX(x float64) string {
	if x == 0 {
		return ""
	}
	return fmt.Sprintf("%g", x)
}

// anchors are the implementations ours is compared with, in the order
// their columns come: our own one-lock-per-name way of doing what ours
// does (the multi-lock's), the anchor, the store's ceiling.
var anchors = []string{"onebyone", "theirs", "raw"}

// table renders one group as a markdown table: ours always, and for each
// of anchors the group has values for, its column and ours ÷ it.
func (r *results) table(g group) string {
	var b strings.Builder
	others := []string{}
	for _, impl := range anchors {
		if r.hasImpl(g, impl) {
			others = append(others, impl)
		}
	}
	fmt.Fprintf(&b, "| metric | X | %s |", implLabel(g.Bench, g.Store, "ours"))
	for _, impl := range others {
		fmt.Fprintf(&b, " %s | ours ÷ %s |", implLabel(g.Bench, g.Store, impl), impl)
	}
	b.WriteString("\n|---|--:|--:|" + strings.Repeat("--:|--:|", len(others)) + "\n")
	for _, rw := range g.Rows {
		o, oOK := r.get(g, "ours", rw)
		fmt.Fprintf(&b, "| %s | %s | %s |", rw.Metric, formatX(rw.X), cell(o, oOK, r.Runs))
		for _, impl := range others {
			t, tOK := r.get(g, impl, rw)
			fmt.Fprintf(&b, " %s | %s |", cell(t, tOK, r.Runs), ratioCell(ratio(o, t, oOK, tOK)))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// xMeaning says what X is for a benchmark's metrics, for the headings.
var xMeaning = map[string]string{
	"mutex":     "X is the number of contenders for handoff, acq_per_s and the per-acquisition counts, the queue length for queued_* and drain_*",
	"manylocks": "X is the number of distinct lock names",
	"semaphore": "X is the permit count N of the semaphore's rows; the Mutex's have none",
	"footprint": "X is the number of waiters or sessions",
	"multilock": "X is the number of names K each acquisition takes, at random out of a pool of 2K shared by 8 contenders; K = 1 is the single lock, for reference",
}
