package main

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plotSpec is one line plot: a metric of one benchmark against X, ours
// against the anchor (and our one-lock-per-name way, or the raw ceiling,
// where there is one), one plot per store that measured it.
type plotSpec struct {
	name           string // file name stem; the store is appended
	bench, metric  string
	title          string
	xLabel, yLabel string
}

var plotSpecs = []plotSpec{
	{"handoff-vs-queue", "mutex", "queued_handoff_p50", "Handoff p50 vs queue length", "waiters queued", "handoff p50 (ms)"},
	{"acq-vs-contenders", "mutex", "acq_per_s", "Acquisitions/s vs contenders", "contenders", "acquisitions/s"},
	{"handoff-vs-contenders", "mutex", "handoff_p50", "Handoff p50 vs contenders", "contenders", "handoff p50 (ms)"},
	{"handoff-p99-vs-contenders", "mutex", "handoff_p99", "Handoff p99 vs contenders", "contenders", "handoff p99 (ms)"},
	{"bytes-vs-queue", "mutex", "queued_bytes_per_handoff", "Bytes received per handoff vs queue length (first handoffs)", "waiters queued", "bytes per handoff"},
	{"multilock-acq-vs-names", "multilock", "acq_per_s", "Multi-lock acquisitions/s vs names per acquisition", "names per acquisition (K)", "acquisitions/s"},
	{"multilock-handoff-vs-names", "multilock", "handoff_p50", "Multi-lock handoff p50 vs names per acquisition", "names per acquisition (K)", "handoff p50 (ms)"},
}

// figure is one written plot, for the image links.
type figure struct {
	File, Title string
}

var implColors = map[string]color.Color{
	"ours":   color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"theirs": color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"raw":    color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
	// onebyone is ours too, done the long way: a lighter blue.
	"onebyone": color.RGBA{R: 0x6b, G: 0xae, B: 0xd6, A: 0xff},
}

// medians is one implementation's series of a metric: median at each X,
// with min and max as error bars.
type medians struct {
	xs, med, lo, hi []float64
}

func (m medians) Len() int                        { return len(m.xs) }
func (m medians) XY(i int) (float64, float64)     { return m.xs[i], m.med[i] }
func (m medians) YError(i int) (float64, float64) { return m.med[i] - m.lo[i], m.hi[i] - m.med[i] }

// line collects impl's values of metric in g, by X.
func (r *results) line(g group, impl, metric string) medians {
	var m medians
	for _, rw := range g.Rows {
		if rw.Metric != metric {
			continue
		}
		if s, ok := r.get(g, impl, rw); ok {
			m.xs, m.med, m.lo, m.hi = append(m.xs, rw.X), append(m.med, s.Median), append(m.lo, s.Min), append(m.hi, s.Max)
		}
	}
	return m
}

// plots writes every plot there is data for (at least two points of one
// implementation) into dir, in format ("svg", or "png" to look at them
// where SVG does not show), and returns them in order.
func (r *results) plots(dir, format string) ([]figure, error) {
	var figs []figure
	for _, spec := range plotSpecs {
		for _, g := range r.Groups {
			if g.Bench != spec.bench {
				continue
			}
			file := fmt.Sprintf("%s-%s.%s", spec.name, g.Store, format)
			title := fmt.Sprintf("%s (%s)", spec.title, g.Store)
			ok, err := r.plot(g, spec, title, filepath.Join(dir, file))
			if err != nil {
				return nil, fmt.Errorf("plot %s: %w", file, err)
			}
			if ok {
				figs = append(figs, figure{File: file, Title: title})
			}
		}
	}
	return figs, nil
}

func (r *results) plot(g group, spec plotSpec, title, path string) (bool, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = spec.xLabel
	p.Y.Label.Text = spec.yLabel
	p.Legend.Top = true
	var all medians
	drawn := 0
	for _, impl := range append([]string{"ours"}, anchors...) {
		m := r.line(g, impl, spec.metric)
		if m.Len() == 0 {
			continue
		}
		ln, pts, err := plotter.NewLinePoints(m)
		if err != nil {
			return false, err
		}
		c := implColors[impl]
		ln.Color, pts.Color = c, c
		pts.Shape = draw.CircleGlyph{}
		bars, err := plotter.NewYErrorBars(m)
		if err != nil {
			return false, err
		}
		bars.Color = c
		p.Add(ln, pts, bars)
		p.Legend.Add(implLabel(g.Bench, g.Store, impl), ln, pts)
		all.xs, all.lo, all.hi = append(all.xs, m.xs...), append(all.lo, m.lo...), append(all.hi, m.hi...)
		drawn = max(drawn, m.Len())
	}
	if drawn < 2 {
		return false, nil
	}
	// X spans a factor of 4 to 100 between points: a log axis spaces them
	// evenly. Y goes log only when the lines are more than 10× apart.
	if positive(all.xs) {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = valueTicks(all.xs)
		// Room around the first and last points.
		p.X.Min, p.X.Max = slices.Min(all.xs)/1.3, slices.Max(all.xs)*1.3
	}
	// Room above the lines for the legend, which sits in the top corner.
	if lo, hi := slices.Min(all.lo), slices.Max(all.hi); lo > 0 && hi/lo > 10 {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.TickerFunc(logTicks)
		p.Y.Min, p.Y.Max = lo/1.5, hi*4
	} else {
		p.Y.Min, p.Y.Max = 0, hi*1.3
	}
	p.Add(plotter.NewGrid())
	return true, p.Save(6*vg.Inch, 4*vg.Inch, path)
}

func positive(v []float64) bool {
	for _, x := range v {
		if x <= 0 {
			return false
		}
	}
	return len(v) > 0
}

// valueTicks labels exactly the X values measured.
func valueTicks(xs []float64) plot.ConstantTicks {
	u := slices.Clone(xs)
	slices.Sort(u)
	u = slices.Compact(u)
	ticks := make(plot.ConstantTicks, len(u))
	for i, x := range u {
		ticks[i] = plot.Tick{Value: x, Label: fmt.Sprintf("%g", x)}
	}
	return ticks
}

// logTicks labels 1, 2 and 5 times each power of ten in [lo, hi]: plain
// powers of ten alone leave a range narrower than 10× unlabelled.
func logTicks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		for _, m := range []float64{1, 2, 5} {
			if v := m * math.Pow(10, e); v >= lo && v <= hi {
				ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
			}
		}
	}
	return ticks
}
