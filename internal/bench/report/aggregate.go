package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/distlock/distlock/internal/bench/benchrec"
)

// Record is one number one benchmark run measured.
type Record = benchrec.Record

// readRecords reads JSON lines, skipping blank ones.
func readRecords(r io.Reader) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("records line %d: %w", line, err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading records: %w", err)
	}
	return out, nil
}

// series identifies one quantity of one implementation: the values of
// every run of it are aggregated together.
type series struct {
	Bench, Store, Impl, Metric string
	X                          float64
}

// stat is a series over runs.
type stat struct {
	N                int
	Median, Min, Max float64
	Unit             string
}

// row is one line of a table: a metric at one X, for every implementation.
type row struct {
	Metric string
	X      float64
}

// group is one table: the rows of one benchmark on one store, in the
// order the benchmark emitted their metrics, each metric's X ascending.
type group struct {
	Bench, Store string
	Rows         []row
}

// results is every series aggregated, and the tables to show them in.
type results struct {
	Stats  map[series]stat
	Groups []group
	Runs   int // the most values any series has: the number of runs
}

// benchOrder puts the benchmarks in the order a reader meets them; others
// follow by name.
var benchOrder = []string{"mutex", "rw", "semaphore", "multilock", "election", "manylocks", "footprint"}

func rank(order []string, s string) int {
	if i := slices.Index(order, s); i >= 0 {
		return i
	}
	return len(order)
}

// aggregate computes the median, min and max of every series over runs
// and lays out the tables.
func aggregate(recs []Record) *results {
	values := map[series][]float64{}
	units := map[series]string{}
	type gkey struct{ bench, store string }
	metricOrder := map[gkey][]string{}
	xs := map[gkey]map[string][]float64{}
	for _, r := range recs {
		s := series{r.Bench, r.Store, r.Impl, r.Metric, r.X}
		values[s] = append(values[s], r.Value)
		units[s] = r.Unit
		g := gkey{r.Bench, r.Store}
		if xs[g] == nil {
			xs[g] = map[string][]float64{}
		}
		if _, ok := xs[g][r.Metric]; !ok {
			metricOrder[g] = append(metricOrder[g], r.Metric)
		}
		if !slices.Contains(xs[g][r.Metric], r.X) {
			xs[g][r.Metric] = append(xs[g][r.Metric], r.X)
		}
	}
	res := &results{Stats: map[series]stat{}}
	for s, v := range values {
		st := summarize(v)
		st.Unit = units[s]
		res.Stats[s] = st
		res.Runs = max(res.Runs, st.N)
	}
	for g, metrics := range metricOrder {
		grp := group{Bench: g.bench, Store: g.store}
		for _, m := range metrics {
			x := slices.Clone(xs[g][m])
			slices.Sort(x)
			for _, v := range x {
				grp.Rows = append(grp.Rows, row{Metric: m, X: v})
			}
		}
		res.Groups = append(res.Groups, grp)
	}
	slices.SortFunc(res.Groups, func(a, b group) int {
		return cmp.Or(cmp.Compare(rank(benchOrder, a.Bench), rank(benchOrder, b.Bench)), cmp.Compare(a.Bench, b.Bench),
			cmp.Compare(rank(storeOrder, a.Store), rank(storeOrder, b.Store)), cmp.Compare(a.Store, b.Store))
	})
	return res
}

var storeOrder = []string{"etcd", "zookeeper"}

// summarize returns the median (the mean of the middle two for an even
// count), min and max of v, which must not be empty.
func summarize(v []float64) stat {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return stat{N: n, Median: med, Min: s[0], Max: s[n-1]}
}

// get returns the stat of one implementation at a row of a group.
func (r *results) get(g group, impl string, rw row) (stat, bool) {
	s, ok := r.Stats[series{g.Bench, g.Store, impl, rw.Metric, rw.X}]
	return s, ok
}

// ratio is a÷b's medians, false when either is missing or b's is 0.
func ratio(a, b stat, okA, okB bool) (float64, bool) {
	if !okA || !okB || b.Median == 0 {
		return 0, false
	}
	return a.Median / b.Median, true
}

// hasImpl reports whether any row of g has a value for impl.
func (r *results) hasImpl(g group, impl string) bool {
	for _, rw := range g.Rows {
		if _, ok := r.get(g, impl, rw); ok {
			return true
		}
	}
	return false
}
