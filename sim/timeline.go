package sim

import (
	"bufio"
	"errors"
	"fmt"
	"html"
	"io"
	"time"
)

// timeline keeps what WriteSVG draws: per node, when it ran, was paused or
// cut off, and its clock; the terms; the writes the resource refused or
// wrongly accepted; and the violations.
type timeline struct {
	rows   []*tlRow
	byNode map[*node]*tlRow
	terms  []tlTerm
	writes []tlMark
	viols  []tlMark
	end    time.Duration
}

type tlRow struct {
	name     string
	wall     time.Duration // wall clock minus true time, at the start
	ppb      int64
	down     []span
	pauses   []span
	cuts     []span
	steps    []tlStep
	downFrom time.Duration // -1 while running
	cutFrom  time.Duration // -1 while connected
}

type span struct{ from, to time.Duration }

type tlStep struct {
	at time.Duration
	d  time.Duration
}

type tlTerm struct {
	row        *tlRow
	label      string
	tok        uint64
	start, end time.Duration
}

type tlMark struct {
	row  *tlRow
	at   time.Duration
	kind int // wRefused or wStale for writes; the invariant for violations
}

func (t *timeline) node(n *node) {
	if t.byNode == nil {
		t.byNode = make(map[*node]*tlRow)
	}
	r := &tlRow{name: n.Name, wall: n.clk.l0 + n.clk.wall, ppb: n.clk.ppb, downFrom: 0, cutFrom: -1}
	t.rows = append(t.rows, r)
	t.byNode[n] = r
}

func (t *timeline) up(n *node, now time.Duration) {
	r := t.byNode[n]
	if r.downFrom >= 0 {
		if now > r.downFrom {
			r.down = append(r.down, span{r.downFrom, now})
		}
		r.downFrom = -1
	}
}

func (t *timeline) down(n *node, now time.Duration) {
	if r := t.byNode[n]; r.downFrom < 0 {
		r.downFrom = now
	}
}

func (t *timeline) pause(n *node, from, to time.Duration) {
	r := t.byNode[n]
	r.pauses = append(r.pauses, span{from, to})
}

func (t *timeline) cutStart(n *node, now time.Duration) { t.byNode[n].cutFrom = now }

func (t *timeline) cutEnd(n *node, now time.Duration) {
	r := t.byNode[n]
	if r.cutFrom >= 0 {
		r.cuts = append(r.cuts, span{r.cutFrom, now})
		r.cutFrom = -1
	}
}

func (t *timeline) step(n *node, now, d time.Duration) {
	r := t.byNode[n]
	r.steps = append(r.steps, tlStep{now, d})
}

func (t *timeline) term(tm *term) {
	t.terms = append(t.terms, tlTerm{row: t.byNode[tm.in.node], label: tm.in.label, tok: tm.tok, start: tm.start, end: tm.end})
}

func (t *timeline) write(n *node, now time.Duration, fate int) {
	if fate != wAccepted {
		t.writes = append(t.writes, tlMark{row: t.byNode[n], at: now, kind: fate})
	}
}

func (t *timeline) violation(now time.Duration, inv Invariant) {
	t.viols = append(t.viols, tlMark{at: now, kind: int(inv)})
}

func (t *timeline) finish(w *world) {
	t.end = w.now
	for _, r := range t.rows {
		if r.downFrom >= 0 && t.end > r.downFrom {
			r.down = append(r.down, span{r.downFrom, t.end})
		}
		if r.cutFrom >= 0 {
			r.cuts = append(r.cuts, span{r.cutFrom, t.end})
		}
		r.downFrom, r.cutFrom = -1, -1
	}
}

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

// WriteSVG draws the run as a timeline over true time: one row per node
// with its terms (labelled with their tokens), the spans it was down,
// paused or cut off from the store, its wall-clock offset and drift, the
// steps of its wall clock, the writes the resource refused or wrongly
// accepted, and the violations.
func (r *Result) WriteSVG(out io.Writer) error {
	t := r.tl
	if t == nil {
		return ErrNoTimeline
	}
	bw := bufio.NewWriter(out)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	end := max(t.end, time.Second)
	plot := float64(svgWidth - svgLeft - svgRight)
	x := func(d time.Duration) float64 { return svgLeft + plot*float64(d)/float64(end) }
	height := svgTop + svgRow*len(t.rows) + svgBottom
	rowY := make(map[*tlRow]int, len(t.rows))
	for i, row := range t.rows {
		rowY[row] = svgTop + i*svgRow
	}

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
	p(`<text x="10" y="40" fill="#444">%s simulated, %s, %s refused by the fence, %s</text>`+"\n",
		r.SimTime.Round(time.Second), plural(r.Stats.Terms, "term"), plural(r.Stats.Refused, "write"), verdict)
	legend(bw, svgWidth-560, 16)

	// Time axis and grid.
	tick := niceTick(end)
	axisY := svgTop + svgRow*len(t.rows) + 8
	for d := time.Duration(0); d <= end; d += tick {
		p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`+"\n", x(d), svgTop-4, x(d), axisY)
		p(`<text x="%.1f" y="%d" text-anchor="middle" fill="#444">%s</text>`+"\n", x(d), axisY+16, fmtTick(d))
	}
	p(`<text x="%.1f" y="%d" text-anchor="middle" fill="#444">true time</text>`+"\n", x(end/2), axisY+36)

	for _, row := range t.rows {
		y := rowY[row]
		p(`<text x="10" y="%d" font-weight="bold" font-size="14">%s</text>`+"\n", y+20, html.EscapeString(row.name))
		p(`<text x="40" y="%d" fill="#444" font-size="11">wall clock %s</text>`+"\n", y+13, fmtOffset(row.wall))
		p(`<text x="40" y="%d" fill="#444" font-size="11">drift %+dppm</text>`+"\n", y+27, row.ppb/1000)
		p(`<rect x="%d" y="%d" width="%.1f" height="%d" fill="#f7f7f7"/>`+"\n", svgLeft, y+4, plot, svgBar)
		for _, s := range row.down {
			p(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#bbb"><title>not running</title></rect>`+"\n", x(s.from), y+4, x(s.to)-x(s.from), svgBar)
		}
		for _, s := range row.cuts {
			p(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#f4b6b6"><title>cut off from the store %s–%s</title></rect>`+"\n",
				x(s.from), y+1, max(x(s.to)-x(s.from), 1), svgBar+6, fmtTick(s.from), fmtTick(s.to))
		}
	}
	for _, tm := range t.terms {
		y := rowY[tm.row]
		w := max(x(tm.end)-x(tm.start), 1.5)
		p(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" stroke="#333" stroke-width="0.5"><title>%s token %d: %s–%s</title></rect>`+"\n",
			x(tm.start), y+4, w, svgBar, tokenColor(tm.tok), html.EscapeString(tm.label), tm.tok, fmtTime(tm.start), fmtTime(tm.end))
		if w > 24 {
			p(`<text x="%.1f" y="%d" fill="white" font-weight="bold">%d</text>`+"\n", x(tm.start)+3, y+20, tm.tok)
		}
	}
	for _, row := range t.rows {
		y := rowY[row]
		for _, s := range row.pauses {
			p(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="url(#hatch)" opacity="0.85"><title>paused %s–%s</title></rect>`+"\n",
				x(s.from), y+4, max(x(s.to)-x(s.from), 1), svgBar, fmtTick(s.from), fmtTick(s.to))
		}
		for _, s := range row.steps {
			p(`<path d="M%.1f %d l-5 -7 h10 z" fill="#1f5fbf"><title>wall clock stepped %s</title></path>`+"\n", x(s.at), y+4, fmtOffset(s.d))
			p(`<text x="%.1f" y="%d" fill="#1f5fbf" font-size="10">%s</text>`+"\n", x(s.at)+6, y+2, fmtOffset(s.d))
		}
	}
	for _, m := range t.writes {
		y := rowY[m.row]
		if m.kind == wRefused {
			p(`<path d="M%.1f %d l-4 8 h8 z" fill="#222"><title>write refused: stale token</title></path>`+"\n", x(m.at), y+svgBar+4)
		} else {
			p(`<path d="M%.1f %d l-5 10 h10 z" fill="#d00"><title>stale write ACCEPTED</title></path>`+"\n", x(m.at), y+svgBar+2)
		}
	}
	seen := map[int]bool{}
	for _, v := range t.viols {
		p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#d00" stroke-dasharray="3,3"><title>%v at %s</title></line>`+"\n",
			x(v.at), svgTop-8, x(v.at), axisY, Invariant(v.kind), fmtTime(v.at))
		if !seen[v.kind] {
			seen[v.kind] = true
			p(`<text x="%.1f" y="%d" fill="#d00" font-size="11">%v</text>`+"\n", x(v.at)+2, svgTop-10, Invariant(v.kind))
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
