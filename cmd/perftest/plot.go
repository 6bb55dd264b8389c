package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// runPlot is "perftest plot -o out.svg a.json b.json": the latency and
// bandwidth of several -json result files drawn over each other.
func runPlot(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("perftest plot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "perftest.svg", "output `file`: .svg or .png")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: perftest plot [-o out.svg|out.png] result.json...\n\nDraws latency and bandwidth against message size from perftest -json files, overlaid.\n\n")
		fs.PrintDefaults()
	}
	files, rc := parseInterspersed(fs, args)
	if rc >= 0 {
		return rc
	}
	if len(files) == 0 {
		fmt.Fprintf(stderr, "perftest plot: no result files (write them with -json)\n")
		fs.Usage()
		return 2
	}
	var reps []*Report
	var labels []string
	for _, f := range files {
		rep, err := readReport(f)
		if err != nil {
			fmt.Fprintf(stderr, "perftest plot: %v\n", err)
			return 1
		}
		reps = append(reps, rep)
		labels = append(labels, strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)))
	}
	if len(files) == 1 {
		labels = []string{""}
	}
	if err := plotReports(*out, reps, labels); err != nil {
		fmt.Fprintf(stderr, "perftest plot: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	return 0
}

// readReport reads a perftest -json file.
func readReport(file string) (*Report, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: not a perftest -json file: %w", file, err)
	}
	if len(rep.Results) == 0 {
		return nil, fmt.Errorf("%s: no results", file)
	}
	return &rep, nil
}

// series is one line on a plot.
type series struct {
	label string
	lat   plotter.XYs
	bw    plotter.XYs
	rtNs  []float64 // the placements of its points (cache-line round trip)
}

// collectSeries groups results by file, tool, provider, test and mode.
func collectSeries(reps []*Report, labels []string) []*series {
	var out []*series
	byKey := map[string]*series{}
	for i, rep := range reps {
		for _, r := range rep.Results {
			name := strings.Join([]string{r.Tool, r.Provider, r.Test, r.Mode}, " ")
			if r.Placement != "" {
				name += ", " + r.Placement // one line per placement class
			}
			if labels[i] != "" {
				name = labels[i] + ": " + name
			}
			s := byKey[name]
			if s == nil {
				s = &series{label: name}
				byKey[name] = s
				out = append(out, s)
			}
			if r.Size <= 0 {
				continue // no place on a log axis
			}
			if r.PlacementNs > 0 {
				s.rtNs = append(s.rtNs, r.PlacementNs)
			}
			if l := r.latency(); l > 0 && (r.Test == "latency" || r.Test == "pingpong" || r.Ranks > 0) {
				s.lat = append(s.lat, plotter.XY{X: float64(r.Size), Y: l})
			}
			if r.MBps > 0 {
				s.bw = append(s.bw, plotter.XY{X: float64(r.Size), Y: r.MBps})
			}
		}
	}
	for _, s := range out {
		if len(s.rtNs) > 0 {
			s.label += fmt.Sprintf(" %.0f ns", median(s.rtNs))
		}
		sort.Slice(s.lat, func(i, j int) bool { return s.lat[i].X < s.lat[j].X })
		sort.Slice(s.bw, func(i, j int) bool { return s.bw[i].X < s.bw[j].X })
	}
	return out
}

// plotReports draws latency (top) and bandwidth (bottom) against message
// size, log-log, one line per series, into file (.svg or .png).
func plotReports(file string, reps []*Report, labels []string) error {
	ss := collectSeries(reps, labels)
	title := ""
	if len(reps) == 1 && reps[0].Placement != nil {
		if p := reps[0].Placement; p.RTNs > 0 {
			title = fmt.Sprintf(" (%s: cache-line round trip %.0f ns)", p.Class, p.RTNs)
		} else {
			title = " (" + p.Class + ")"
		}
	}
	ylab := "usec (half round trip, median)"
	if allCollective(reps) {
		ylab = "usec per call (median)"
	}
	lat := newLogPlot("Latency"+title, "message size (bytes)", ylab)
	bw := newLogPlot("Bandwidth"+title, "message size (bytes)", "MB/s")
	bw.Legend.Top, bw.Legend.Left = false, false // curves rise to the upper right
	var nLat, nBW int
	for i, s := range ss {
		for _, d := range []struct {
			p   *plot.Plot
			xys plotter.XYs
			n   *int
		}{{lat, s.lat, &nLat}, {bw, s.bw, &nBW}} {
			if len(d.xys) == 0 {
				continue
			}
			l, pts, err := plotter.NewLinePoints(d.xys)
			if err != nil {
				return err
			}
			l.Color = plotutil.Color(i)
			l.Dashes = plotutil.Dashes(i / 7)
			pts.Color = plotutil.Color(i)
			pts.Shape = plotutil.Shape(i)
			d.p.Add(l, pts)
			d.p.Legend.Add(s.label, l, pts)
			*d.n++
		}
	}
	if nLat == 0 && nBW == 0 {
		return errors.New("nothing to draw: no result with a size above 0 and a latency or bandwidth")
	}
	const w, h = 18 * vg.Centimeter, 24 * vg.Centimeter
	var c interface {
		vg.CanvasSizer
		io.WriterTo
	}
	switch strings.ToLower(filepath.Ext(file)) {
	case ".svg":
		c = vgsvg.NewWith(vgsvg.UseWH(w, h), vgsvg.EmbedFonts(false))
	case ".png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))}
	default:
		return fmt.Errorf("%s: want a .svg or .png file name", file)
	}
	dc := draw.New(c)
	var rows [][]*plot.Plot
	if nLat > 0 {
		rows = append(rows, []*plot.Plot{lat})
	}
	if nBW > 0 {
		rows = append(rows, []*plot.Plot{bw})
	}
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadX: vg.Centimeter / 2, PadY: vg.Centimeter / 2,
		PadTop: vg.Centimeter / 2, PadBottom: vg.Centimeter / 2, PadLeft: vg.Centimeter / 2, PadRight: vg.Centimeter / 2}
	canvases := plot.Align(rows, tiles, dc)
	for i, row := range rows {
		row[0].Draw(canvases[i][0])
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// allCollective reports whether every result is a collective's (perftest
// coll, benchmarks/coll.sh), whose latency is per call.
func allCollective(reps []*Report) bool {
	for _, rep := range reps {
		for _, r := range rep.Results {
			if r.Ranks == 0 {
				return false
			}
		}
	}
	return true
}

func newLogPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = sizeTicks{}, plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// sizeTicks labels powers of four in bytes (1, 4, 16, ..., 1k, 4k, ...).
type sizeTicks struct{}

func (sizeTicks) Ticks(lo, hi float64) []plot.Tick {
	var t []plot.Tick
	for v := 1.0; v <= hi*4; v *= 4 {
		if v < lo/4 {
			continue
		}
		t = append(t, plot.Tick{Value: v, Label: sizeStr(int64(v))})
	}
	return t
}
