package sim

import "time"

// drawing is what a run kept for drawing (Options.Timeline): per node,
// when it ran, was paused or cut off, and its clock; the terms; the writes
// the resource refused or wrongly accepted; and the violations. All times
// are true times since the start of the run. cmd/tenure draws it as SVG.
type drawing struct {
	Rows       []*drawRow
	Terms      []drawTerm
	Writes     []drawMark // refused or wrongly accepted writes
	Acts       []drawAct  // a user's program's acts (simtest)
	Violations []drawMark // Inv 0: a user's check
	End        time.Duration

	byNode map[*node]int
}

// drawRow is one node.
type drawRow struct {
	Name   string
	Wall   time.Duration // wall clock minus true time, at the start
	PPB    int64         // clock rate error at the start
	Down   []drawSpan    // not running
	Pauses []drawSpan
	Cuts   []drawSpan // cut off from the store
	Steps  []drawStep // wall-clock steps

	downFrom time.Duration // -1 while running
	cutFrom  time.Duration // -1 while connected
}

// drawSpan is an interval of true time.
type drawSpan struct{ From, To time.Duration }

// drawStep is a wall-clock step of D at true time At.
type drawStep struct{ At, D time.Duration }

// drawTerm is a term on row Row.
type drawTerm struct {
	Row        int
	Label      string // the instance, and the lock it holds in a lock scenario
	Token      uint64
	Start, End time.Duration
}

// drawMark is a write on row Row (Refused, or accepted although stale),
// or a violation of Inv (Row -1).
type drawMark struct {
	Row     int
	At      time.Duration
	Refused bool
	Inv     Invariant
}

// drawAct is an act of a user's program on row Row.
type drawAct struct {
	Row  int
	At   time.Duration
	What string
}

func (t *drawing) act(n *node, now time.Duration, what string) {
	t.Acts = append(t.Acts, drawAct{Row: t.byNode[n], At: now, What: what})
}

func (t *drawing) node(n *node) {
	if t.byNode == nil {
		t.byNode = make(map[*node]int)
	}
	t.byNode[n] = len(t.Rows)
	t.Rows = append(t.Rows, &drawRow{Name: n.Name, Wall: n.clk.l0 + n.clk.wall, PPB: n.clk.ppb, downFrom: 0, cutFrom: -1})
}

func (t *drawing) row(n *node) *drawRow { return t.Rows[t.byNode[n]] }

func (t *drawing) up(n *node, now time.Duration) {
	r := t.row(n)
	if r.downFrom >= 0 {
		if now > r.downFrom {
			r.Down = append(r.Down, drawSpan{r.downFrom, now})
		}
		r.downFrom = -1
	}
}

func (t *drawing) down(n *node, now time.Duration) {
	if r := t.row(n); r.downFrom < 0 {
		r.downFrom = now
	}
}

func (t *drawing) pause(n *node, from, to time.Duration) {
	r := t.row(n)
	r.Pauses = append(r.Pauses, drawSpan{from, to})
}

func (t *drawing) cutStart(n *node, now time.Duration) { t.row(n).cutFrom = now }

func (t *drawing) cutEnd(n *node, now time.Duration) {
	r := t.row(n)
	if r.cutFrom >= 0 {
		r.Cuts = append(r.Cuts, drawSpan{r.cutFrom, now})
		r.cutFrom = -1
	}
}

func (t *drawing) step(n *node, now, d time.Duration) {
	r := t.row(n)
	r.Steps = append(r.Steps, drawStep{now, d})
}

func (t *drawing) term(tm *term) {
	label := tm.in.label
	if tm.lock != "" {
		label += " " + tm.lock
	}
	t.Terms = append(t.Terms, drawTerm{Row: t.byNode[tm.in.node], Label: label, Token: tm.tok, Start: tm.start, End: tm.end})
}

func (t *drawing) write(n *node, now time.Duration, fate int) {
	if fate != wAccepted {
		t.Writes = append(t.Writes, drawMark{Row: t.byNode[n], At: now, Refused: fate == wRefused})
	}
}

func (t *drawing) violation(now time.Duration, inv Invariant) {
	t.Violations = append(t.Violations, drawMark{Row: -1, At: now, Inv: inv})
}

func (t *drawing) finish(w *world) {
	t.End = w.now
	for _, r := range t.Rows {
		if r.downFrom >= 0 && t.End > r.downFrom {
			r.Down = append(r.Down, drawSpan{r.downFrom, t.End})
		}
		if r.cutFrom >= 0 {
			r.Cuts = append(r.Cuts, drawSpan{r.cutFrom, t.End})
		}
		r.downFrom, r.cutFrom = -1, -1
	}
}
