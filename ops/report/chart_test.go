package report

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"testing"
	"time"
)

func chartReport(groups []Group, history []Point) Report {
	return Report{Name: "daily-capacity", Cluster: "ml-prod-eks", At: t0, Groups: groups, History: history}
}

func group(name string, alloc, free int64) Group {
	return Group{Name: name, GPUs: newGPUs(alloc+free, alloc)}
}

// colourCounts decodes the PNG, checks its size and counts the pixels of each series colour.
func colourCounts(t *testing.T, b []byte) map[color.RGBA]int {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if got := img.Bounds().Size(); got != (image.Point{X: ChartWidth, Y: ChartHeight}) {
		t.Fatalf("chart is %v, want %dx%d", got, ChartWidth, ChartHeight)
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
