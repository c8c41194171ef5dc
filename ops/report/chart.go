package report

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The chart's width and smallest height in pixels, and its resolution. The chart grows taller with the number of
// instance groups, so each group keeps a readable row however many there are.
const (
	ChartWidth  = 1000
	ChartHeight = 800
	chartDPI    = 96
)

// The layout in pixels: a legend strip above the bars (outside the plot, so it never covers a bar), a row per
// group, and the utilisation line below.
const (
	legendStrip = 36
	rowHeight   = 26
	barsFixed   = 140 // the bar plot's title, axis and padding
	linePanel   = 300
)

// ChartSize is the size of the chart of a report with groups instance groups.
func ChartSize(groups int) (width, height int) {
	return ChartWidth, max(ChartHeight, legendStrip+barsFixed+rowHeight*max(groups, 1)+linePanel)
}

// The series colours; tests count them to find the bars and the line.
var (
	colorAllocated = color.RGBA{R: 0xE4, G: 0x57, B: 0x1E, A: 0xFF}
	colorFree      = color.RGBA{R: 0x2E, G: 0x8B, B: 0x57, A: 0xFF}
	colorLine      = color.RGBA{R: 0x1F, G: 0x4E, B: 0xB4, A: 0xFF}
)

// sans is the chart's font: Liberation Sans, which gonum embeds (the default is a serif).
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// Chart draws the report as a PNG: per instance group a horizontal bar of its GPUs, allocated stacked on free,
// labelled with the figures, and the legend above the plot; below it the utilisation of the series over time.
func Chart(r Report) ([]byte, error) {
	bars, legend, err := barPlot(r)
	if err != nil {
		return nil, fmt.Errorf("chart %s: bars: %w", r.Cluster, err)
	}
	line, err := linePlot(r)
	if err != nil {
		return nil, fmt.Errorf("chart %s: utilisation line: %w", r.Cluster, err)
	}
	w, h := ChartSize(len(r.Groups))
	px := func(n int) vg.Length { return vg.Length(n) * vg.Inch / chartDPI }
	// NewWith clears the image to white itself (a plain memory fill); filling the canvas again as a path would
	// rasterise every pixel a second time.
	img := vgimg.NewWith(vgimg.UseWH(px(w), px(h)), vgimg.UseDPI(chartDPI), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	pad := px(10)
	// vg's origin is the bottom left: the line panel at the bottom, the bars above it, the legend strip on top.
	linePart := draw.Crop(dc, pad, -pad, pad, px(linePanel)-px(h))
	barPart := draw.Crop(dc, pad, -pad, px(linePanel), -px(legendStrip))
	legendPart := draw.Crop(dc, pad, -pad, px(h-legendStrip), -px(6))
	bars.Draw(barPart)
	line.Draw(linePart)
	if legend != nil {
		legend.Draw(legendPart)
	}
	return encodePNG(img.Image(), r.Cluster)
}

// chartPNGSize is a generous first guess at an encoded chart, so the buffer rarely grows while encoding.
const chartPNGSize = 96 << 10

// encodePNG writes the chart at zlib's best speed: a chart of flat fills and text compresses nearly as well as at the
// default level, in a fraction of the time.
func encodePNG(img image.Image, cluster string) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, chartPNGSize))
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(buf, img); err != nil {
		return nil, fmt.Errorf("chart %s: encode PNG: %w", cluster, err)
	}
	return buf.Bytes(), nil
}

func newPlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	for _, st := range []*text.Style{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle, &p.X.Tick.Label, &p.Y.Tick.Label,
		&p.Legend.TextStyle} {
		st.Font = font.From(sans, st.Font.Size)
	}
	p.Title.TextStyle.Font.Size = vg.Points(14)
	return p
}

// barPlot draws a row per group: allocated GPUs, then free ones stacked on them, and "allocated of total" at the
// end of the bar. The legend is returned to be drawn outside the plot.
func barPlot(r Report) (*plot.Plot, *plot.Legend, error) {
	p := newPlot(fmt.Sprintf("GPUs by instance group: %s, %s", r.Cluster, r.At.Format("2006-01-02 15:04 MST")))
	p.X.Label.Text = "GPUs"
	p.X.Min = 0
	if len(r.Groups) == 0 {
		p.Title.Text += ": no instance groups to show"
		p.HideAxes()
		return p, nil, nil
	}
	n := len(r.Groups)
	alloc, free := make(plotter.Values, n), make(plotter.Values, n)
	names := make([]string, n)
	labels := plotter.XYLabels{XYs: make(plotter.XYs, n), Labels: make([]string, n)}
	most := 1.0
	for i, g := range r.Groups {
		// The first group at the top, as a list reads.
		j := n - 1 - i
		alloc[j], free[j] = float64(g.GPUs.Allocated), float64(g.GPUs.Free)
		names[j] = clipName(g.Name)
		total := alloc[j] + free[j]
		most = max(most, total)
		labels.XYs[j] = plotter.XY{X: total, Y: float64(j)}
		labels.Labels[j] = fmt.Sprintf("%d of %d allocated", g.GPUs.Allocated, g.GPUs.Allocated+g.GPUs.Free)
	}
	width := vg.Points(float64(rowHeight) * 0.72 * 72 / chartDPI)
	a, err := plotter.NewBarChart(alloc, width)
	if err != nil {
		return nil, nil, err
	}
	f, err := plotter.NewBarChart(free, width)
	if err != nil {
		return nil, nil, err
	}
	a.Horizontal, f.Horizontal = true, true
	a.Color, f.Color = colorAllocated, colorFree
	a.LineStyle.Width, f.LineStyle.Width = 0, 0
	f.StackOn(a)
	lb, err := plotter.NewLabels(labels)
	if err != nil {
		return nil, nil, err
	}
	for i := range lb.TextStyle {
		lb.TextStyle[i].Font = font.From(sans, vg.Points(10))
		lb.TextStyle[i].YAlign = draw.YCenter
	}
	lb.Offset = vg.Point{X: vg.Points(4)}
	grid := plotter.NewGrid()
	grid.Horizontal.Width = 0
	p.Add(grid, a, f, lb)
	p.NominalY(names...)
	p.X.Tick.Marker = wholeTicks{}
	// Room at the right end for the longest label, and half a row above and below the outer groups.
	p.X.Max = most * 1.3
	p.Y.Min, p.Y.Max = -0.5, float64(n)-0.5
	legend := plot.NewLegend()
	legend.TextStyle.Font = font.From(sans, vg.Points(12))
	legend.Top, legend.Left = true, true
	legend.Add("allocated GPUs", a)
	legend.Add("free GPUs", f)
	return p, &legend, nil
}

// wholeTicks labels only whole numbers: GPUs do not come in halves.
type wholeTicks struct{}

func (wholeTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for _, t := range (plot.DefaultTicks{}).Ticks(lo, hi) {
		if t.Label != "" && t.Value != float64(int64(t.Value)) {
			t.Label = ""
		}
		out = append(out, t)
	}
	return out
}

// clipName keeps a group name short enough for the axis.
func clipName(s string) string {
	if r := []rune(s); len(r) > 28 {
		return string(r[:27]) + "…"
	}
	return s
}

func linePlot(r Report) (*plot.Plot, error) {
	p := newPlot("GPU utilisation over time (allocated / allocatable), %")
	p.Y.Min, p.Y.Max = 0, 100
	p.Y.Label.Text = "%"
	if len(r.History) == 0 {
		p.HideX()
		return p, nil
	}
	format := "Jan 2 15:04"
	if r.History[len(r.History)-1].At.Sub(r.History[0].At) > 72*time.Hour {
		format = "Jan 2"
	}
	p.X.Tick.Marker = plot.TimeTicks{Format: format, Time: plot.UnixTimeIn(r.At.Location())}
	xys := make(plotter.XYs, len(r.History))
	for i, pt := range r.History {
		xys[i].X = float64(pt.At.Unix())
		xys[i].Y = pt.Utilisation * 100
	}
	first, last := r.History[0].At, r.History[len(r.History)-1].At
	if !last.After(first) {
		// one point: give the axis an hour on each side so the point sits in the middle
		p.X.Min, p.X.Max = float64(first.Add(-time.Hour).Unix()), float64(first.Add(time.Hour).Unix())
	}
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return nil, err
	}
	l.Color, s.Color = colorLine, colorLine
	l.Width = vg.Points(2)
	s.Shape = draw.CircleGlyph{}
	s.Radius = vg.Points(3)
	p.Add(plotter.NewGrid(), l, s)
	return p, nil
}
