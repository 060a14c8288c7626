package sim

import (
	"bufio"
	"errors"
	"fmt"
	"html"
	"io"
	"slices"
	"time"
)

// ErrNoTimeline is returned by WriteSVG for a run made without
// Options.Timeline.
var ErrNoTimeline = errors.New("sim: the run kept no timeline (set Options.Timeline)")

// Layout of the SVG, in pixels.
const (
	svgWidth  = 1280
	svgLeft   = 170 // node labels
	svgRight  = 20
	svgTop    = 64
	svgRow    = 40
	svgBar    = 22
	svgBottom = 56
)

// WriteSVG draws the run as SVG over true time: one row per node with
// its terms (labelled with their tokens), the spans it was down, paused or
// cut off from the store, its wall-clock offset and drift, the steps of its
// wall clock, the writes the resource refused or wrongly accepted, and the
// violations.
func (r *Result) WriteSVG(out io.Writer) error {
	t := r.timeline
	if t == nil {
		return ErrNoTimeline
	}
	bw := bufio.NewWriter(out)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	end := max(t.End, time.Second)
	plot := float64(svgWidth - svgLeft - svgRight)
	x := func(d time.Duration) float64 { return svgLeft + plot*float64(d)/float64(end) }
	height := svgTop + svgRow*len(t.Rows) + svgBottom
	rowY := func(i int) int { return svgTop + i*svgRow }

	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	p(`<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">` +
		`<rect width="6" height="6" fill="#d8d8d8"/><line x1="0" y1="0" x2="0" y2="6" stroke="#888" stroke-width="2"/></pattern></defs>` + "\n")
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	title := fmt.Sprintf("%s, seed %d: %v, %v resource, %s tier", r.Scenario, r.Seed, r.Options.Strategy, r.Options.Resource, r.Tier)
	p(`<text x="10" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	verdict := "no violation"
	if n := totalViolations(r); n > 0 {
		verdict = plural(n, "violation")
	}
	if n := len(slices.DeleteFunc(slices.Clone(t.Violations), func(v drawMark) bool { return v.Inv != 0 })); n > 0 {
		verdict += ", " + plural(n, "failed check")
	}
	p(`<text x="10" y="40" fill="#444">%s simulated, %s, %s refused by the fence, %s</text>`+"\n",
		r.SimTime.Round(time.Second), plural(r.stats.Terms, "term"), plural(r.stats.Refused, "write"), verdict)
	legend(bw, svgWidth-560, 16)
	if len(t.Acts) > 0 {
		p(`<g transform="translate(%d,%d)"><circle cx="7" cy="6" r="3" fill="#555"/><text x="18" y="11">the program's act</text></g>`+"\n", svgWidth-560, 36)
	}

	// Time axis and grid.
	tick := niceTick(end)
	axisY := svgTop + svgRow*len(t.Rows) + 8
	for d := time.Duration(0); d <= end; d += tick {
		p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`+"\n", x(d), svgTop-4, x(d), axisY)
		p(`<text x="%.1f" y="%d" text-anchor="middle" fill="#444">%s</text>`+"\n", x(d), axisY+16, fmtTick(d))
	}
	p(`<text x="%.1f" y="%d" text-anchor="middle" fill="#444">true time</text>`+"\n", x(end/2), axisY+36)

	for i, row := range t.Rows {
		y := rowY(i)
		p(`<text x="10" y="%d" font-weight="bold" font-size="14">%s</text>`+"\n", y+20, html.EscapeString(row.Name))
		p(`<text x="40" y="%d" fill="#444" font-size="11">wall clock %s</text>`+"\n", y+13, fmtOffset(row.Wall))
		p(`<text x="40" y="%d" fill="#444" font-size="11">drift %+dppm</text>`+"\n", y+27, row.PPB/1000)
		p(`<rect x="%d" y="%d" width="%.1f" height="%d" fill="#f7f7f7"/>`+"\n", svgLeft, y+4, plot, svgBar)
		for _, s := range row.Down {
			p(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#bbb"><title>not running</title></rect>`+"\n", x(s.From), y+4, x(s.To)-x(s.From), svgBar)
		}
		for _, s := range row.Cuts {
			p(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#f4b6b6"><title>cut off from the store %s–%s</title></rect>`+"\n",
				x(s.From), y+1, max(x(s.To)-x(s.From), 1), svgBar+6, fmtTick(s.From), fmtTick(s.To))
		}
	}
	for _, tm := range t.Terms {
		y := rowY(tm.Row)
		w := max(x(tm.End)-x(tm.Start), 1.5)
		p(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" stroke="#333" stroke-width="0.5"><title>%s token %d: %s–%s</title></rect>`+"\n",
			x(tm.Start), y+4, w, svgBar, tokenColor(tm.Token), html.EscapeString(tm.Label), tm.Token, fmtTime(tm.Start), fmtTime(tm.End))
		if w > 24 {
			p(`<text x="%.1f" y="%d" fill="white" font-weight="bold">%d</text>`+"\n", x(tm.Start)+3, y+20, tm.Token)
		}
	}
	for i, row := range t.Rows {
		y := rowY(i)
		for _, s := range row.Pauses {
			p(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="url(#hatch)" opacity="0.85"><title>paused %s–%s</title></rect>`+"\n",
				x(s.From), y+4, max(x(s.To)-x(s.From), 1), svgBar, fmtTick(s.From), fmtTick(s.To))
		}
		for _, s := range row.Steps {
			p(`<path d="M%.1f %d l-5 -7 h10 z" fill="#1f5fbf"><title>wall clock stepped %s</title></path>`+"\n", x(s.At), y+4, fmtOffset(s.D))
			p(`<text x="%.1f" y="%d" fill="#1f5fbf" font-size="10">%s</text>`+"\n", x(s.At)+6, y+2, fmtOffset(s.D))
		}
	}
	for _, m := range t.Writes {
		y := rowY(m.Row)
		if m.Refused {
			p(`<path d="M%.1f %d l-4 8 h8 z" fill="#222"><title>write refused: stale token</title></path>`+"\n", x(m.At), y+svgBar+4)
		} else {
			p(`<path d="M%.1f %d l-5 10 h10 z" fill="#d00"><title>stale write ACCEPTED</title></path>`+"\n", x(m.At), y+svgBar+2)
		}
	}
	for _, a := range t.Acts {
		p(`<circle cx="%.1f" cy="%d" r="2" fill="#555"><title>%s at %s</title></circle>`+"\n",
			x(a.At), rowY(a.Row)+svgBar+8, html.EscapeString(a.What), fmtTime(a.At))
	}
	seen := map[Invariant]bool{}
	for _, v := range t.Violations {
		label := v.Inv.String()
		if v.Inv == 0 {
			label = "failed check" // a user's program's (simtest)
		}
		p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#d00" stroke-dasharray="3,3"><title>%s at %s</title></line>`+"\n",
			x(v.At), svgTop-8, x(v.At), axisY, label, fmtTime(v.At))
		if !seen[v.Inv] {
			seen[v.Inv] = true
			p(`<text x="%.1f" y="%d" fill="#d00" font-size="11">%s</text>`+"\n", x(v.At)+2, svgTop-10, label)
		}
	}
	p("</svg>\n")
	return bw.Flush()
}

func legend(w io.Writer, x, y int) {
	item := func(dx int, swatch, label string) {
		fmt.Fprintf(w, `<g transform="translate(%d,%d)">%s<text x="18" y="11">%s</text></g>`+"\n", x+dx, y, swatch, label)
	}
	item(0, `<rect width="14" height="12" fill="`+tokenColor(3)+`"/>`, "term (token)")
	item(100, `<rect width="14" height="12" fill="url(#hatch)"/>`, "paused")
	item(170, `<rect width="14" height="12" fill="#f4b6b6"/>`, "cut off")
	item(245, `<rect width="14" height="12" fill="#bbb"/>`, "not running")
	item(345, `<path d="M7 0 l-5 -0 l5 10 l5 -10 z" fill="#1f5fbf"/>`, "wall step")
	item(430, `<path d="M7 2 l-4 8 h8 z" fill="#222"/>`, "refused write")
	fmt.Fprintf(w, `<g transform="translate(%d,%d)"><path d="M7 2 l-5 10 h10 z" fill="#d00"/><text x="18" y="11">stale write accepted</text>`+
		`<line x1="160" y1="0" x2="160" y2="12" stroke="#d00" stroke-dasharray="3,3"/><text x="166" y="11">violation</text></g>`+"\n", x+100, y+20)
}

func totalViolations(r *Result) int {
	n := 0
	for _, c := range r.Counts {
		n += c
	}
	return n
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func tokenColor(tok uint64) string {
	return fmt.Sprintf("hsl(%d,55%%,45%%)", (tok*137+200)%360)
}

func niceTick(end time.Duration) time.Duration {
	for _, t := range []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour} {
		if end/t <= 12 {
			return t
		}
	}
	return 2 * time.Hour
}

func fmtTick(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.Round(time.Second).String()
}

func fmtOffset(d time.Duration) string {
	if d = d.Round(time.Millisecond); d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}
