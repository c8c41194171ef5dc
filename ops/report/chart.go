package report

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The chart's size in pixels and resolution: wide enough for a dozen groups, small enough for a Slack preview.
const (
	ChartWidth  = 1000
	ChartHeight = 800
	chartDPI    = 96
)

// The series colours; tests count them to find the bars and the line.
var (
	colorAllocated = color.RGBA{R: 0xE4, G: 0x57, B: 0x1E, A: 0xFF}
	colorFree      = color.RGBA{R: 0x2E, G: 0x8B, B: 0x57, A: 0xFF}
	colorLine      = color.RGBA{R: 0x1F, G: 0x4E, B: 0xB4, A: 0xFF}
)

// Chart draws the report as a PNG: GPUs allocated and free per instance group as bars on top, the utilisation of
// the series over time as a line below.
func Chart(r Report) ([]byte, error) {
	bars, err := barPlot(r)
	if err != nil {
		return nil, fmt.Errorf("chart %s: bars: %w", r.Cluster, err)
	}
	line, err := linePlot(r)
	if err != nil {
		return nil, fmt.Errorf("chart %s: utilisation line: %w", r.Cluster, err)
	}
	px := func(n int) vg.Length { return vg.Length(n) * vg.Inch / chartDPI }
	// NewWith clears the image to white itself (a plain memory fill); filling the canvas again as a path would
	// rasterise every pixel a second time.
	img := vgimg.NewWith(vgimg.UseWH(px(ChartWidth), px(ChartHeight)), vgimg.UseDPI(chartDPI), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6),
		PadRight: vg.Points(12), PadY: vg.Points(18)}
	plots := [][]*plot.Plot{{bars}, {line}}
	canvases := plot.Align(plots, tiles, dc)
	bars.Draw(canvases[0][0])
	line.Draw(canvases[1][0])
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

func barPlot(r Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("GPUs by instance group: %s, %s", r.Cluster, r.At.Format("2006-01-02 15:04 MST"))
	p.Y.Label.Text = "GPUs"
	p.Y.Min = 0
	p.Legend.Top = true
	if len(r.Groups) == 0 {
		p.Title.Text += " (no instance groups)"
		p.HideX()
		return p, nil
	}
	alloc := make(plotter.Values, len(r.Groups))
	free := make(plotter.Values, len(r.Groups))
	names := make([]string, len(r.Groups))
	for i, g := range r.Groups {
		alloc[i], free[i] = float64(g.GPUs.Allocated), float64(g.GPUs.Free)
		names[i] = g.Name
	}
	// Two bars per group share 70% of the group's slot.
	width := vg.Length(ChartWidth) * vg.Inch / chartDPI * 0.8 / vg.Length(len(r.Groups)) * 0.35
	a, err := plotter.NewBarChart(alloc, width)
	if err != nil {
		return nil, err
	}
	f, err := plotter.NewBarChart(free, width)
	if err != nil {
		return nil, err
	}
	a.Color, f.Color = colorAllocated, colorFree
	a.LineStyle.Width, f.LineStyle.Width = 0, 0
	a.Offset, f.Offset = -width/2, width/2
	p.Add(a, f, plotter.NewGrid())
	p.Legend.Add("allocated", a)
	p.Legend.Add("free", f)
	p.NominalX(names...)
	// half a slot of room on each side, so the outer groups' bars are not cut at the axis ends
	p.X.Min, p.X.Max = -0.5, float64(len(r.Groups))-0.5
	return p, nil
}

func linePlot(r Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "GPU utilisation (allocated / allocatable), %"
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
