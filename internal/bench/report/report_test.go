package main

import (
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	for _, c := range []struct {
		in          []float64
		med, lo, hi float64
	}{
		{[]float64{3}, 3, 3, 3},
		{[]float64{5, 1, 3}, 3, 1, 5},
		{[]float64{4, 1, 3, 10}, 3.5, 1, 10},
	} {
		s := summarize(c.in)
		if s.N != len(c.in) || s.Median != c.med || s.Min != c.lo || s.Max != c.hi {
			t.Errorf("summarize(%v) = %+v, want median %v [%v–%v]", c.in, s, c.med, c.lo, c.hi)
		}
	}
}

const sample = `{"bench":"mutex","store":"etcd","impl":"ours","metric":"acq_per_s","x":2,"value":300,"unit":"1/s"}
{"bench":"mutex","store":"etcd","impl":"theirs","metric":"acq_per_s","x":2,"value":20,"unit":"1/s"}
{"bench":"mutex","store":"etcd","impl":"ours","metric":"acq_per_s","x":2,"value":360,"unit":"1/s"}
{"bench":"mutex","store":"etcd","impl":"theirs","metric":"acq_per_s","x":2,"value":30,"unit":"1/s"}

{"bench":"mutex","store":"etcd","impl":"ours","metric":"lock_p50","value":1.5,"unit":"ms"}
{"bench":"mutex","store":"etcd","impl":"ours","metric":"acq_per_s","x":8,"value":250,"unit":"1/s"}
{"bench":"footprint","store":"zookeeper","impl":"ours","metric":"heap_per_waiter","x":10000,"value":4000,"unit":"B"}
{"bench":"manylocks","store":"etcd","impl":"ours","metric":"acq_per_s","x":100,"value":900,"unit":"1/s"}
{"bench":"manylocks","store":"etcd","impl":"raw","metric":"acq_per_s","x":100,"value":1800,"unit":"1/s"}
{"bench":"multilock","store":"zookeeper","impl":"ours","metric":"acq_per_s","x":4,"value":60,"unit":"1/s"}
{"bench":"multilock","store":"zookeeper","impl":"onebyone","metric":"acq_per_s","x":4,"value":30,"unit":"1/s"}
{"bench":"multilock","store":"zookeeper","impl":"theirs","metric":"acq_per_s","x":4,"value":20,"unit":"1/s"}
`

func TestAggregate(t *testing.T) {
	recs, err := readRecords(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	res := aggregate(recs)
	if res.Runs != 2 {
		t.Errorf("runs = %d, want 2", res.Runs)
	}
	var order []string
	for _, g := range res.Groups {
		order = append(order, g.Bench+"/"+g.Store)
	}
	if got := strings.Join(order, " "); got != "mutex/etcd multilock/zookeeper manylocks/etcd footprint/zookeeper" {
		t.Errorf("tables in order %q", got)
	}
	mutex := res.Groups[0]
	var rows []string
	for _, r := range mutex.Rows {
		rows = append(rows, r.Metric+"@"+formatX(r.X))
	}
	// Metrics in the order first emitted, each one's X ascending.
	if got := strings.Join(rows, " "); got != "acq_per_s@2 acq_per_s@8 lock_p50@" {
		t.Errorf("rows %q", got)
	}
	o, oOK := res.get(mutex, "ours", row{"acq_per_s", 2})
	th, tOK := res.get(mutex, "theirs", row{"acq_per_s", 2})
	if o.Median != 330 || o.Min != 300 || o.Max != 360 || th.Median != 25 {
		t.Errorf("ours %+v, theirs %+v", o, th)
	}
	if r, ok := ratio(o, th, oOK, tOK); !ok || r != 330.0/25 {
		t.Errorf("ratio = %v, %v", r, ok)
	}
	_, missing := res.get(mutex, "theirs", row{"lock_p50", 0})
	if _, ok := ratio(o, stat{}, oOK, missing); ok {
		t.Error("a ratio against a missing series")
	}

	tbl := res.table(mutex)
	for _, want := range []string{
		"| acq_per_s | 2 | 330/s [300–360] | 25.0/s [20.0–30.0] | 13.20× |",
		"| acq_per_s | 8 | 250/s (n=1) | — | — |",
		"| lock_p50 |  | 1.50 ms (n=1) | — | — |",
	} {
		if !strings.Contains(tbl, want) {
			t.Errorf("table lacks %q:\n%s", want, tbl)
		}
	}
	if strings.Contains(tbl, "ours ÷ raw") {
		t.Error("raw columns in a table without raw values")
	}
	if many := res.table(res.Groups[2]); !strings.Contains(many, "| 1800/s (n=1) | 0.50× |") || strings.Contains(many, "theirs") {
		t.Errorf("manylocks table: want raw and ours ÷ raw, no theirs:\n%s", many)
	}
	// The multi-lock's two anchors, ours one by one first.
	multi := res.table(res.Groups[1])
	for _, want := range []string{
		"| ours (recipe.MultiMutex) | onebyone (recipe.Mutex ×K in order) | ours ÷ onebyone | theirs (zk.Lock ×K in order) | ours ÷ theirs |",
		"| acq_per_s | 4 | 60.0/s (n=1) | 30.0/s (n=1) | 2.00× | 20.0/s (n=1) | 3.00× |",
	} {
		if !strings.Contains(multi, want) {
			t.Errorf("multilock table lacks %q:\n%s", want, multi)
		}
	}
}

func TestSplice(t *testing.T) {
	doc := "# T\n\nprose\n" + beginMarker + "\nold table\n" + endMarker + "\nafter\n"
	got, err := splice(doc, "new\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# T\n\nprose\n" + beginMarker + "\nnew\n" + endMarker + "\nafter\n"
	if got != want {
		t.Errorf("splice = %q, want %q", got, want)
	}
	// Splicing again gives the same document.
	if again, _ := splice(got, "new"); again != want {
		t.Errorf("second splice = %q", again)
	}
	for _, bad := range []string{
		"no markers",
		beginMarker + " only",
		endMarker + "\n" + beginMarker,
		beginMarker + beginMarker + endMarker,
	} {
		if _, err := splice(bad, "x"); err == nil {
			t.Errorf("splice(%q) did not fail", bad)
		}
	}
}

func TestMarkdownLinksPlots(t *testing.T) {
	recs, _ := readRecords(strings.NewReader(sample))
	res := aggregate(recs)
	md := res.markdown(provenance{Date: "2026-01-01", Commit: "abc1234", Dirty: true, Runs: 2, Go: "go1.26"},
		[]figure{{File: "acq-vs-contenders-etcd.svg", Title: "Acq"}}, "bench")
	for _, want := range []string{
		"commit `abc1234` with uncommitted changes;",
		"![Acq](bench/acq-vs-contenders-etcd.svg)", // docs/performance.md links the plots in docs/bench
		"#### footprint (zookeeper)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// The plot follows the mutex tables, before the next benchmark's.
	if strings.Index(md, "![Acq]") > strings.Index(md, "#### manylocks") {
		t.Error("plot not placed after its benchmark's tables")
	}
}
