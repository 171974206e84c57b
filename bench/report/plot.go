package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Plots are 800x500 pixels: 600x375 points at 96 dots per inch.
const (
	plotWidth  vg.Length = 600
	plotHeight vg.Length = 375
	plotDPI              = 96
)

// writePlots writes every plot the results have data for into dir and
// returns the names of the files written.
func writePlots(ws []*workload, dir string) (map[string]bool, error) {
	made := map[string]bool{}
	save := func(c *chart, name string) error {
		if c == nil {
			return nil
		}
		made[name] = true
		return c.savePNG(filepath.Join(dir, name))
	}
	for _, w := range ws {
		if err := save(latencyPlot(w), w.name+"-latency.png"); err != nil {
			return nil, err
		}
		if w.headline.name == mbs.name || w.headline.name == eps.name {
			if err := save(throughputPlot(w), w.name+"-throughput.png"); err != nil {
				return nil, err
			}
		}
	}
	if err := save(roundsPlot(pubsubRounds(ws)), "pubsub-rounds.png"); err != nil {
		return nil, err
	}
	return made, nil
}

// chart is a plot with, when it has several lines or series, a legend to
// its right (inside, the legend would hide data).
type chart struct {
	*plot.Plot
	legend    plot.Legend
	hasLegend bool
}

func (ch *chart) savePNG(path string) error {
	c := vgimg.NewWith(vgimg.UseWH(plotWidth, plotHeight), vgimg.UseDPI(plotDPI))
	dc := draw.New(c)
	right := vg.Length(16)
	if ch.hasLegend {
		w := ch.legend.Rectangle(dc).Size().X
		ch.legend.Draw(draw.Crop(dc, plotWidth-w-12, -12, 8, -36))
		right += w + 12
	}
	ch.Draw(draw.Crop(dc, 8, -right, 8, -8)) // a margin round the edges
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

func newPlot(title, x, y string) *chart {
	p := &chart{Plot: plot.New(), legend: plot.NewLegend()}
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = 14
	p.X.Label.Text, p.Y.Label.Text = x, y
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = 12
		a.Tick.Label.Font.Size = 10
	}
	p.legend.TextStyle.Font.Size = 10
	p.legend.Top, p.legend.Left = true, true
	p.legend.Padding = 4
	return p
}

func (ch *chart) addLegend(name string, t plot.Thumbnailer) {
	ch.hasLegend = true
	ch.legend.Add(name, t)
}

// systemColors keeps a system's colour the same in every plot.
var systemColors = map[string]color.RGBA{
	"tern":               {0x1f, 0x77, 0xb4, 0xff},
	"kafka":              {0xff, 0x7f, 0x0e, 0xff},
	"nats":               {0x2c, 0xa0, 0x2c, 0xff},
	"woodpecker":         {0xd6, 0x27, 0x28, 0xff},
	"woodpecker-minio":   {0x94, 0x67, 0xbd, 0xff},
	"woodpecker-service": {0xff, 0x98, 0x96, 0xff},
	"walrus":             {0x8c, 0x56, 0x4b, 0xff},
	"rocksdb":            {0xe3, 0x77, 0xc2, 0xff},
	"pulsar":             {0xbc, 0xbd, 0x22, 0xff},
	"s3":                 {0x17, 0xbe, 0xcf, 0xff},
}

// rowColor is the row's system colour; limits are shades of grey, one per
// variant, and variants that are not durable at acknowledgement are paler.
func rowColor(r *row, limitIndex int) color.RGBA {
	if r.System == "disk" {
		g := uint8(0x30 + 0x38*(limitIndex%4))
		return color.RGBA{g, g, g, 0xff}
	}
	c, ok := systemColors[r.System]
	if !ok {
		h := 0
		for _, b := range []byte(r.System) {
			h = h*31 + int(b)
		}
		c = color.RGBA{uint8(60 + h%150), uint8(60 + (h/150)%150), uint8(60 + (h/22500)%150), 0xff}
	}
	if r.group == groupOther {
		c = color.RGBA{c.R/2 + 0x7f, c.G/2 + 0x7f, c.B/2 + 0x7f, 0xff}
	}
	return c
}

// rowDashes: solid for durable rows, dashed for the others, dotted for
// the limits after the first.
func rowDashes(r *row, limitIndex int) []vg.Length {
	switch {
	case r.group == groupLimit && limitIndex > 0:
		return []vg.Length{vg.Points(2), vg.Points(2)}
	case r.group == groupOther:
		return []vg.Length{vg.Points(6), vg.Points(3)}
	case r.group == groupDurable && r.Variant != "durable":
		return []vg.Length{vg.Points(8), vg.Points(2), vg.Points(2), vg.Points(2)}
	}
	return nil
}

// latencyPlot draws latency by percentile, x in nines; nil when no system
// other than a limit has percentiles.
func latencyPlot(w *workload) *chart {
	if !slices.ContainsFunc(w.rows, func(r *row) bool { return r.group != groupLimit && len(r.Percentiles) > 0 }) {
		return nil
	}
	maxUS, maxX := 0.0, 0.0
	for _, r := range w.rows {
		for _, pt := range r.Percentiles {
			maxUS = max(maxUS, pt[1])
			if pt[0] < 100 {
				maxX = max(maxX, nines(pt[0]))
			}
		}
	}
	unit, scale := "µs", 1.0
	if maxUS >= 10_000 {
		unit, scale = "ms", 1e-3
	}
	p := newPlot(w.name+": latency by percentile", "percentile", "latency ("+unit+")")
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	p.X.Min, p.X.Max = 0, max(3, math.Ceil(maxX))
	ticks := []plot.Tick{{Value: nines(50), Label: "50%"}}
	for n, label := 1, "90"; float64(n) <= p.X.Max; n, label = n+1, label+"9" {
		if n == 2 {
			label = "99"
		} else if n == 3 {
			label = "99.9"
		}
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: label + "%"})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Add(plotter.NewGrid())
	limits := 0
	for _, r := range w.rows {
		var xys plotter.XYs
		for _, pt := range r.Percentiles {
			if pt[0] < 100 && pt[1] > 0 {
				xys = append(xys, plotter.XY{X: nines(pt[0]), Y: pt[1] * scale})
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			continue // a NaN or an infinity: nothing to draw
		}
		l.Color = rowColor(r, limits)
		l.Dashes = rowDashes(r, limits)
		l.Width = vg.Points(1.5)
		if r.group == groupTern {
			l.Width = vg.Points(2.5)
		}
		if r.group == groupLimit {
			limits++
		}
		p.Add(l)
		p.addLegend(r.label(), l)
	}
	return p
}

// nines is a percentile on the axis of nines: 90% is 1, 99% 2, 99.9% 3.
func nines(percentile float64) float64 { return -math.Log10(1 - percentile/100) }

// logTicks labels 1, 2 and 5 times each power of ten, so that a range
// within one decade still has labels.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = fmt.Sprintf("%g", v)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// linearTicks labels about five round values: 1, 2 or 5 times a power of ten apart.
type linearTicks struct{}

func (linearTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return nil
	}
	base := math.Pow(10, math.Floor(math.Log10((hi-lo)/5)))
	step := base
	for _, m := range []float64{1, 2, 5, 10} {
		if step = base * m; (hi-lo)/step <= 6 {
			break
		}
	}
	prec := max(0, int(-math.Floor(math.Log10(step))))
	var ts []plot.Tick
	for i := math.Ceil(lo / step); i*step <= hi*(1+1e-9); i++ {
		label := strconv.FormatFloat(i*step, 'f', prec, 64)
		if prec == 0 && i*step >= 1000 {
			label = thousands(i * step)
		}
		ts = append(ts, plot.Tick{Value: i * step, Label: label})
	}
	return ts
}

// throughputPlot draws the headline rate of each row as horizontal bars,
// first row at the top; nil when no row has it.
func throughputPlot(w *workload) *chart {
	var rows []*row
	for _, r := range w.rows {
		if barValue(w, r) > 0 {
			rows = append(rows, r)
		}
	}
	if !slices.ContainsFunc(rows, func(r *row) bool { return r.group != groupLimit }) {
		return nil
	}
	p := newPlot(w.name+": "+w.headline.name, w.headline.name, "")
	grid := plotter.NewGrid()
	grid.Horizontal.Color = nil
	p.Add(grid)
	n := len(rows)
	names := make([]string, n)
	var labels plotter.XYLabels
	limits, top := 0, 0.0
	for i, r := range rows {
		y := float64(n - 1 - i)
		v := barValue(w, r)
		top = max(top, v)
		names[n-1-i] = r.label()
		if w.headline.name == eps.name && r.group == groupLimit && r.EntriesPerSec != v {
			names[n-1-i] += fmt.Sprintf(" (as %s entries)", sizeLabel(int64(w.spec.EntryBytes)))
		}
		b, err := plotter.NewBarChart(plotter.Values{v}, vg.Points(min(36, 180/float64(n))))
		if err != nil {
			return nil
		}
		b.Horizontal, b.XMin = true, y
		b.Color = rowColor(r, limits)
		b.LineStyle.Width = 0
		if r.group == groupLimit {
			limits++
		}
		p.Add(b)
		labels.XYs = append(labels.XYs, plotter.XY{X: v, Y: y})
		labels.Labels = append(labels.Labels, number(v))
	}
	l, err := plotter.NewLabels(labels)
	if err != nil {
		return nil
	}
	l.Offset = vg.Point{X: vg.Points(4)}
	for i := range l.TextStyle {
		l.TextStyle[i].YAlign = draw.YCenter
		l.TextStyle[i].Font.Size = 9
	}
	p.Add(l)
	p.NominalY(names...)
	p.Y.Min, p.Y.Max = -0.5, float64(n)-0.5
	p.X.Min, p.X.Max = 0, top*1.2
	p.X.Tick.Marker = linearTicks{}
	p.Y.Tick.Label.Font.Size = 9
	return p
}

// barValue is a row's headline rate. A limit writes in blocks of its own
// size, so against entries/s it counts as the workload's entries its bytes
// would make.
func barValue(w *workload, r *row) float64 {
	if w.headline.name == eps.name && r.group == groupLimit && w.spec.EntryBytes > 0 {
		return float64(r.Bytes) / r.Seconds / float64(w.spec.EntryBytes)
	}
	return w.headline.value(r.Result)
}

// roundsPlot draws the round time of each pubsub round per durable system
// as grouped bars; nil when there are none.
func roundsPlot(rounds []*workload) *chart {
	type series struct {
		r      *row
		values plotter.Values
	}
	var ss []*series
	for i, w := range rounds {
		for _, r := range w.rows {
			if (r.group != groupTern && r.group != groupDurable) || roundTime.value(r.Result) <= 0 {
				continue
			}
			j := slices.IndexFunc(ss, func(s *series) bool { return s.r.System == r.System && s.r.Variant == r.Variant })
			if j < 0 {
				ss = append(ss, &series{r: r, values: make(plotter.Values, len(rounds))})
				j = len(ss) - 1
			}
			ss[j].values[i] = roundTime.value(r.Result)
		}
	}
	if len(ss) == 0 {
		return nil
	}
	p := newPlot("pub/sub rounds: produce + consume (durable at acknowledgement)", "round", "round time (s)")
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil
	p.Add(grid)
	width := vg.Points(min(40, 440/float64(len(rounds)*len(ss))))
	top := 0.0
	for j, s := range ss {
		b, err := plotter.NewBarChart(s.values, width)
		if err != nil {
			return nil
		}
		b.Color = rowColor(s.r, 0)
		b.LineStyle.Width = 0
		b.Offset = vg.Length(float64(j)-float64(len(ss)-1)/2) * width
		p.Add(b)
		p.addLegend(s.r.label(), b)
		top = max(top, slices.Max(s.values))
	}
	var names []string
	for _, w := range rounds {
		names = append(names, roundLabel(w.spec))
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(rounds))-0.5
	p.Y.Min, p.Y.Max = 0, top*1.1
	p.Y.Tick.Marker = linearTicks{}
	return p
}
