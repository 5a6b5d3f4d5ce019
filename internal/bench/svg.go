package bench

import (
	"bufio"
	"cmp"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
)

// WriteSVG draws a report's figures against store size as plain SVG:
// latency (p50 solid, p99 dashed), throughput, and the restarts' times,
// each on log-log axes. Measurements made at one size only show as dots.
func WriteSVG(w io.Writer, rep *Report) error {
	lat, thr, rst := map[string]*series{}, map[string]*series{}, map[string]*series{}
	var order []string
	add := func(m map[string]*series, key, label string, dashed bool, x int, y float64) {
		if x <= 0 || y <= 0 || math.IsNaN(y) || math.IsInf(y, 0) {
			return
		}
		s := m[key]
		if s == nil {
			s = &series{label: label, dashed: dashed}
			m[key] = s
			order = append(order, key)
		}
		s.pts = append(s.pts, point{float64(x), y})
	}
	for _, r := range rep.Results {
		if r.Scenario == Insert || r.Scenario == Advance || r.Name == "raw badger: 1 fsynced txn per write" {
			continue // made at one store size each: in the table
		}
		if f := r.Restart; f != nil {
			add(rst, "healthz "+f.Signal, "/healthz after "+f.Signal, f.Signal == "SIGKILL", r.StoreSize, f.HealthzMs/1000)
			add(rst, "steady "+f.Signal, "recall steady after "+f.Signal, f.Signal == "SIGKILL", r.StoreSize, f.SteadyMs/1000)
			add(rst, "idle "+f.Signal, "idle after "+f.Signal, f.Signal == "SIGKILL", r.StoreSize, f.IdleMs/1000)
			continue
		}
		label := r.Name
		if r.Path == "http" {
			label = fmt.Sprintf("%s, %d clients", r.Name, r.Clients)
		}
		if r.Scenario == Mixed {
			label = "mixed: " + label
		}
		key := r.Scenario + "|" + label
		add(lat, key+"|p50", label+" p50", false, r.StoreSize, r.P50Ms)
		add(lat, key+"|p99", label+" p99", true, r.StoreSize, r.P99Ms)
		add(thr, key, label, false, r.StoreSize, r.PerSecond)
	}
	panels := []struct {
		title, unit string
		m           map[string]*series
	}{
		{"latency against store size (p50 solid, p99 dashed)", "ms", lat},
		{"throughput against store size", "operations/s", thr},
		{"restart against store size (SIGTERM solid, SIGKILL dashed)", "s from the process's start", rst},
	}
	const width, height = 960, 420
	var drawn []int
	for i, p := range panels {
		if len(p.m) > 0 {
			drawn = append(drawn, i)
		}
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n",
		width, max(1, len(drawn))*height+40)
	fmt.Fprintf(bw, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(bw, `<text x="10" y="22" font-size="15">memoria bench %s: %d CPUs, load %.1f→%.1f, corpus %s</text>`+"\n",
		rep.StartedAt.Format("2006-01-02 15:04"), rep.Machine.CPUs, rep.Machine.LoadStart[0], rep.Machine.LoadEnd[0], html.EscapeString(rep.Settings.Corpus))
	for n, i := range drawn {
		p := panels[i]
		var ss []*series
		for _, k := range order {
			if s := p.m[k]; s != nil {
				ss = append(ss, s)
			}
		}
		plot(bw, 0, 40+n*height, width, height, p.title, p.unit, ss)
	}
	fmt.Fprintln(bw, "</svg>")
	return bw.Flush()
}

type point struct{ x, y float64 }

type series struct {
	label  string
	dashed bool
	pts    []point
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

// plot draws one panel at (x0, y0): log-log axes, a line per series, a
// legend on the right.
func plot(w io.Writer, x0, y0, width, height int, title, unit string, ss []*series) {
	const left, top, bottom, legend = 70, 30, 45, 330
	pw, ph := float64(width-left-legend), float64(height-top-bottom)
	xr, yr := rangeOf(ss, func(p point) float64 { return p.x }), rangeOf(ss, func(p point) float64 { return p.y })
	px := func(x float64) float64 { return float64(x0+left) + pw*(math.Log10(x)-xr[0])/(xr[1]-xr[0]) }
	py := func(y float64) float64 { return float64(y0+top) + ph*(1-(math.Log10(y)-yr[0])/(yr[1]-yr[0])) }
	fmt.Fprintf(w, `<text x="%d" y="%d" font-size="14">%s</text>`+"\n", x0+left, y0+18, html.EscapeString(title))
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#333"/>`+"\n", x0+left, y0+top, pw, ph)
	for _, t := range ticks(yr) {
		y := py(t)
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x0+left, y, float64(x0+left)+pw, y)
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", x0+left-5, y+4, num(t))
	}
	for _, t := range ticks(xr) {
		x := px(t)
		fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, y0+top, x, float64(y0+top)+ph)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, float64(y0+top)+ph+16, FormatSize(int(math.Round(t))))
	}
	fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle">memories in the store</text>`+"\n", float64(x0+left)+pw/2, y0+height-8)
	fmt.Fprintf(w, `<text transform="translate(%d,%.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", x0+16, float64(y0+top)+ph/2, html.EscapeString(unit))
	for i, s := range ss {
		color := palette[i%len(palette)]
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6,4"`
		}
		pts := slices.Clone(s.pts)
		slices.SortFunc(pts, func(a, b point) int { return cmp.Compare(a.x, b.x) })
		if len(pts) > 1 {
			fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="`, color, dash)
			for _, p := range pts {
				fmt.Fprintf(w, "%.1f,%.1f ", px(p.x), py(p.y))
			}
			fmt.Fprintln(w, `"/>`)
		}
		for _, p := range pts {
			fmt.Fprintf(w, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s: %s at %s</title></circle>`+"\n",
				px(p.x), py(p.y), color, html.EscapeString(s.label), num(p.y), FormatSize(int(math.Round(p.x))))
		}
		ly := y0 + top + 10 + 16*i
		lx := x0 + width - legend + 15
		fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly-4, lx+24, ly-4, color, dash)
		fmt.Fprintf(w, `<text x="%d" y="%d">%s</text>`+"\n", lx+30, ly, html.EscapeString(clip(s.label, 46)))
	}
}

// rangeOf is the log10 range of the series' values, widened to at least
// one decade and by a margin.
func rangeOf(ss []*series, v func(point) float64) [2]float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, p := range s.pts {
			lo, hi = min(lo, math.Log10(v(p))), max(hi, math.Log10(v(p)))
		}
	}
	if hi-lo < 1 {
		mid := (lo + hi) / 2
		lo, hi = mid-0.5, mid+0.5
	}
	return [2]float64{lo - 0.05*(hi-lo), hi + 0.05*(hi-lo)}
}

// ticks are the 1, 2, 5 × powers of ten within a log10 range (only the
// powers when the range spans more than three decades).
func ticks(r [2]float64) []float64 {
	var out []float64
	for e := math.Floor(r[0]); e <= math.Ceil(r[1]); e++ {
		for _, m := range []float64{1, 2, 5} {
			if m > 1 && r[1]-r[0] > 3 {
				continue
			}
			if l := e + math.Log10(m); l >= r[0] && l <= r[1] {
				out = append(out, math.Pow(10, l))
			}
		}
	}
	return out
}

func num(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'g', 2, 64)
}
