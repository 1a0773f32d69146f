// Command report turns the Records that `make bench` collected (JSON
// lines, one per number per run; see internal/bench's Record) into
// markdown tables of medians and [min–max] over runs with ours ÷ theirs
// ratios, and SVG plots, and splices them into docs/performance.md:
//
//	go -C internal/bench build -o ../../bin/benchreport ./report
//	bin/benchreport -in bench-out/records.jsonl -out docs/bench -doc docs/performance.md
//
// (from the repository's root, whose git state and integration/go.mod it
// reads).
//
// It writes DIR/results.md and DIR/*.svg; with -doc, it replaces what
// stands between <!-- bench:begin --> and <!-- bench:end --> in that
// markdown file with the same content, linking the plots relative to it.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

func main() {
	in := flag.String("in", "bench-out/records.jsonl", "records to read (JSON lines)")
	out := flag.String("out", "docs/bench", "directory for results.md and the plots")
	doc := flag.String("doc", "", "markdown file whose bench markers get the results, e.g. docs/performance.md (none: leave it)")
	goV := flag.String("go", runtime.Version(), "Go version to name in the header")
	etcdV := flag.String("etcd", "", "etcd version to name in the header (default: integration/go.mod's)")
	zkV := flag.String("zookeeper", "", "ZooKeeper version to name in the header (default: the Debian package's)")
	quick := flag.Bool("quick", false, "the records come from a BENCH_QUICK run: say so in the header")
	format := flag.String("format", "svg", "image format of the plots (svg, png)")
	flag.Parse()
	if err := run(*in, *out, *doc, *format, provenance{Go: *goV, Etcd: *etcdV, ZK: *zkV, Quick: *quick}); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(in, out, doc, format string, p provenance) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	recs, err := readRecords(f)
	f.Close()
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return fmt.Errorf("%s has no records: did the benchmarks run with BENCH_RECORDS set?", in)
	}
	res := aggregate(recs)

	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	figs, err := res.plots(out, format)
	if err != nil {
		return err
	}
	p.Date, p.Runs = today(), res.Runs
	p.CPU, p.Cores, p.Kernel = machine()
	p.Commit, p.Dirty = gitState(out, doc)
	if p.Etcd == "" {
		p.Etcd = etcdVersion("integration/go.mod")
	}
	if p.ZK == "" {
		p.ZK = zkVersion()
	}

	md := "# Benchmark results\n\n" + res.markdown(p, figs, "")
	if err := os.WriteFile(filepath.Join(out, "results.md"), []byte(md), 0o644); err != nil {
		return err
	}
	if doc == "" {
		return nil
	}
	rel, err := filepath.Rel(filepath.Dir(doc), out)
	if err != nil {
		return err
	}
	text, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	spliced, err := splice(string(text), res.markdown(p, figs, filepath.ToSlash(rel)))
	if err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	return os.WriteFile(doc, []byte(spliced), 0o644)
}

// markdown renders the header, every table (a heading per benchmark and
// store) and, after each benchmark's tables, its plots, linked under
// imgDir ("" for plots beside the document).
func (r *results) markdown(p provenance, figs []figure, imgDir string) string {
	var b strings.Builder
	b.WriteString(p.header())
	for i, g := range r.Groups {
		fmt.Fprintf(&b, "\n#### %s (%s)\n\n", g.Bench, g.Store)
		if m, ok := xMeaning[g.Bench]; ok {
			fmt.Fprintf(&b, "%s.\n\n", m)
		}
		b.WriteString(r.table(g))
		if i+1 < len(r.Groups) && r.Groups[i+1].Bench == g.Bench {
			continue
		}
		var imgs []string
		for _, f := range figs {
			if figureBench(f.File) == g.Bench {
				imgs = append(imgs, fmt.Sprintf("![%s](%s)", f.Title, joinURL(imgDir, f.File)))
			}
		}
		if len(imgs) > 0 {
			fmt.Fprintf(&b, "\n%s\n", strings.Join(imgs, "\n"))
		}
	}
	return b.String()
}

// figureBench is the benchmark a plot file belongs to.
func figureBench(file string) string {
	for _, s := range plotSpecs {
		if strings.HasPrefix(file, s.name+"-") {
			return s.bench
		}
	}
	return ""
}

func joinURL(dir, file string) string {
	if dir == "" || dir == "." {
		return file
	}
	return strings.TrimSuffix(dir, "/") + "/" + file
}
