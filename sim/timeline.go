package sim

import "time"

// Timeline is what a run kept for drawing (Options.Timeline): per node,
// when it ran, was paused or cut off, and its clock; the terms; the writes
// the resource refused or wrongly accepted; and the violations. All times
// are true times since the start of the run. cmd/tenure draws it as SVG.
type Timeline struct {
	Rows       []*TimelineRow
	Terms      []TimelineTerm
	Writes     []TimelineMark // refused or wrongly accepted writes
	Violations []TimelineMark
	End        time.Duration

	byNode map[*node]int
}

// TimelineRow is one node.
type TimelineRow struct {
	Name   string
	Wall   time.Duration // wall clock minus true time, at the start
	PPB    int64         // clock rate error at the start
	Down   []Span        // not running
	Pauses []Span
	Cuts   []Span // cut off from the store
	Steps  []Step // wall-clock steps

	downFrom time.Duration // -1 while running
	cutFrom  time.Duration // -1 while connected
}

// Span is an interval of true time.
type Span struct{ From, To time.Duration }

// Step is a wall-clock step of D at true time At.
type Step struct{ At, D time.Duration }

// TimelineTerm is a term on row Row.
type TimelineTerm struct {
	Row        int
	Label      string // the instance, and the lock it holds in a lock scenario
	Token      uint64
	Start, End time.Duration
}

// TimelineMark is a write on row Row (Refused, or accepted although stale),
// or a violation of Inv (Row -1).
type TimelineMark struct {
	Row     int
	At      time.Duration
	Refused bool
	Inv     Invariant
}

func (t *Timeline) node(n *node) {
	if t.byNode == nil {
		t.byNode = make(map[*node]int)
	}
	t.byNode[n] = len(t.Rows)
	t.Rows = append(t.Rows, &TimelineRow{Name: n.Name, Wall: n.clk.l0 + n.clk.wall, PPB: n.clk.ppb, downFrom: 0, cutFrom: -1})
}

func (t *Timeline) row(n *node) *TimelineRow { return t.Rows[t.byNode[n]] }

func (t *Timeline) up(n *node, now time.Duration) {
	r := t.row(n)
	if r.downFrom >= 0 {
		if now > r.downFrom {
			r.Down = append(r.Down, Span{r.downFrom, now})
		}
		r.downFrom = -1
	}
}

func (t *Timeline) down(n *node, now time.Duration) {
	if r := t.row(n); r.downFrom < 0 {
		r.downFrom = now
	}
}

func (t *Timeline) pause(n *node, from, to time.Duration) {
	r := t.row(n)
	r.Pauses = append(r.Pauses, Span{from, to})
}

func (t *Timeline) cutStart(n *node, now time.Duration) { t.row(n).cutFrom = now }

func (t *Timeline) cutEnd(n *node, now time.Duration) {
	r := t.row(n)
	if r.cutFrom >= 0 {
		r.Cuts = append(r.Cuts, Span{r.cutFrom, now})
		r.cutFrom = -1
	}
}

func (t *Timeline) step(n *node, now, d time.Duration) {
	r := t.row(n)
	r.Steps = append(r.Steps, Step{now, d})
}

func (t *Timeline) term(tm *term) {
	label := tm.in.label
	if tm.lock != "" {
		label += " " + tm.lock
	}
	t.Terms = append(t.Terms, TimelineTerm{Row: t.byNode[tm.in.node], Label: label, Token: tm.tok, Start: tm.start, End: tm.end})
}

func (t *Timeline) write(n *node, now time.Duration, fate int) {
	if fate != wAccepted {
		t.Writes = append(t.Writes, TimelineMark{Row: t.byNode[n], At: now, Refused: fate == wRefused})
	}
}

func (t *Timeline) violation(now time.Duration, inv Invariant) {
	t.Violations = append(t.Violations, TimelineMark{Row: -1, At: now, Inv: inv})
}

func (t *Timeline) finish(w *world) {
	t.End = w.now
	for _, r := range t.Rows {
		if r.downFrom >= 0 && t.End > r.downFrom {
			r.Down = append(r.Down, Span{r.downFrom, t.End})
		}
		if r.cutFrom >= 0 {
			r.Cuts = append(r.Cuts, Span{r.cutFrom, t.End})
		}
		r.downFrom, r.cutFrom = -1, -1
	}
}
