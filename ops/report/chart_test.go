package report

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"testing"
	"time"
)

// t0 is when the charts' reports were read.
var t0 = time.Date(2025, 3, 10, 16, 0, 0, 0, time.UTC)

func chartReport(groups []Group, history []Point) Report {
	return Report{Name: "daily-capacity", Cluster: "ml-prod-eks", At: t0, Groups: groups, History: history}
}

func group(name string, alloc, free int64) Group {
	return Group{Name: name, GPUs: GPUsOf(alloc+free, alloc)}
}

func decode(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	return img
}

func rgba(img image.Image, x, y int) color.RGBA {
	r, g, b, a := img.At(x, y).RGBA()
	return color.RGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: uint8(a >> 8)}
}

// colourCounts decodes the PNG, checks its size and counts the pixels of each series colour.
func colourCounts(t *testing.T, b []byte) map[color.RGBA]int {
	t.Helper()
	img := decode(t, b)
	if got := img.Bounds().Size(); got.X != ChartWidth || got.Y < ChartHeight {
		t.Fatalf("chart is %v, want %d wide and at least %d high", got, ChartWidth, ChartHeight)
	}
	counts := map[color.RGBA]int{}
	nonWhite := 0
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			r, g, b, a := img.At(x, y).RGBA()
			c := color.RGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: uint8(a >> 8)}
			counts[c]++
			if c != (color.RGBA{0xFF, 0xFF, 0xFF, 0xFF}) {
				nonWhite++
			}
		}
	}
	if nonWhite < 2000 { // titles and axes alone draw several thousand
		t.Fatalf("chart is blank: %d non-white pixels", nonWhite)
	}
	return counts
}

func TestChartBars(t *testing.T) {
	// The legend shows a swatch of each colour; bars are many times larger.
	const legend = 400
	tests := []struct {
		name       string
		groups     []Group
		allocMore  bool // allocated bars cover more pixels than free ones
		wantAlloc  bool
		wantFree   bool
		wantGroups int
	}{
		{"mostly allocated", []Group{group("train-p5", 30, 2), group("infer-g5", 6, 2)}, true, true, true, 2},
		{"mostly free", []Group{group("train-p5", 2, 30), group("infer-g5", 1, 7)}, false, true, true, 2},
		{"nothing allocated", []Group{group("train-p5", 0, 32)}, false, false, true, 1},
		{"nothing free", []Group{group("train-p5", 32, 0)}, true, true, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Chart(chartReport(tt.groups, nil))
			if err != nil {
				t.Fatalf("Chart: %v", err)
			}
			counts := colourCounts(t, b)
			alloc, free := counts[colorAllocated], counts[colorFree]
			if (alloc > legend) != tt.wantAlloc || (free > legend) != tt.wantFree {
				t.Errorf("allocated pixels %d, free pixels %d; want bars allocated=%v free=%v", alloc, free, tt.wantAlloc, tt.wantFree)
			}
			if (alloc > free) != tt.allocMore {
				t.Errorf("allocated pixels %d vs free %d: want allocated larger = %v", alloc, free, tt.allocMore)
			}
		})
	}
}

func TestChartBarsScaleWithValues(t *testing.T) {
	one, err := Chart(chartReport([]Group{group("a", 10, 10), group("b", 20, 0)}, nil))
	if err != nil {
		t.Fatal(err)
	}
	c := colourCounts(t, one)
	// b's allocated bar is twice a's, and a's free bar equals a's allocated: allocated ≈ 3 × free in area.
	ratio := float64(c[colorAllocated]) / float64(c[colorFree])
	if ratio < 2.5 || ratio > 3.5 {
		t.Errorf("allocated/free pixel ratio = %.2f (%d/%d), want about 3", ratio, c[colorAllocated], c[colorFree])
	}
}

func TestChartLine(t *testing.T) {
	hist := func(n int) []Point {
		var ps []Point
		for i := range n {
			ps = append(ps, Point{At: t0.Add(time.Duration(i-n+1) * 24 * time.Hour), Utilisation: float64(i%4) / 4})
		}
		return ps
	}
	tests := []struct {
		name    string
		history []Point
		minLine int
	}{
		{"no history", nil, 0},
		{"one report", hist(1), 20},
		{"a month", hist(30), 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Chart(chartReport([]Group{group("g", 1, 1)}, tt.history))
			if err != nil {
				t.Fatalf("Chart: %v", err)
			}
			got := colourCounts(t, b)[colorLine]
			if tt.minLine == 0 && got != 0 || got < tt.minLine {
				t.Errorf("line pixels = %d, want ≥ %d (0 when no history)", got, tt.minLine)
			}
		})
	}
}

func TestChartNoGroups(t *testing.T) {
	b, err := Chart(chartReport(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if c := colourCounts(t, b); c[colorAllocated] != 0 || c[colorFree] != 0 {
		t.Errorf("an empty cluster drew bars: %d allocated, %d free pixels", c[colorAllocated], c[colorFree])
	}
}

// For 0, 1, 14 and 40 groups: the chart grows a row per group, each row is a separate bar tall enough to read
// its label, and the legend sits in its own strip above the plot, where no bar reaches.
func TestChartLayoutForManyGroups(t *testing.T) {
	for _, n := range []int{0, 1, 14, 40} {
		t.Run(fmt.Sprintf("%d groups", n), func(t *testing.T) {
			var gs []Group
			for i := range n {
				gs = append(gs, group(fmt.Sprintf("gpu-group-%02d", i), int64(1+i%7), int64(1+i%5)))
			}
			b, err := Chart(chartReport(gs, []Point{{At: t0, Utilisation: 0.5}}))
			if err != nil {
				t.Fatal(err)
			}
			img := decode(t, b)
			w, h := ChartSize(n)
			if got := img.Bounds().Size(); got != (image.Point{X: w, Y: h}) {
				t.Fatalf("chart is %v, want %dx%d", got, w, h)
			}
			bar := func(c color.RGBA) bool { return c == colorAllocated || c == colorFree }
			// The legend strip: swatches of both colours, nothing else of the bars' colours.
			inStrip := map[color.RGBA]int{}
			for y := 0; y < legendStrip; y++ {
				for x := 0; x < w; x++ {
					if c := rgba(img, x, y); bar(c) {
						inStrip[c]++
					}
				}
			}
			if n > 0 && (inStrip[colorAllocated] == 0 || inStrip[colorFree] == 0) {
				t.Errorf("no legend above the plot: %v", inStrip)
			}
			if inStrip[colorAllocated] > 600 || inStrip[colorFree] > 600 {
				t.Errorf("bars reach into the legend strip: %v", inStrip)
			}
			// Down the column just right of the bars' start, every group is one run of bar colour, none merged.
			x0 := -1
			for x := 0; x < w && x0 < 0; x++ {
				for y := legendStrip + 20; y < h-linePanel; y++ {
					if bar(rgba(img, x, y)) {
						x0 = x + 3
						break
					}
				}
			}
			runs, inRun, short := 0, false, 0
			for y := legendStrip + 20; y < h-linePanel && x0 >= 0; y++ {
				switch on := bar(rgba(img, x0, y)); {
				case on && !inRun:
					runs, inRun = runs+1, true
					start := y
					for y < h-linePanel && bar(rgba(img, x0, y)) {
						y++
					}
					if y-start < 14 {
						short++
					}
					inRun = false
				}
			}
			if runs != n {
				t.Errorf("%d bars down the plot, want one per group (%d)", runs, n)
			}
			if short > 0 {
				t.Errorf("%d bars are under 14 px tall: too small to label", short)
			}
		})
	}
}
