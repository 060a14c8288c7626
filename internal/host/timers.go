package host

import (
	"container/heap"
	"time"
)

// timers orders entries by their Due, and entries due at the same instant
// by when they first had a Due: a heap, so that a host of many locks finds
// the next wake-up in O(log n), in an order that a model can follow (the
// simulator's of the Candidate: its lease, then its standby).
type timers struct {
	h     []Entry
	ranks uint64
}

func (t *timers) Len() int { return len(t.h) }
func (t *timers) Less(i, j int) bool {
	a, b := t.h[i].slot(), t.h[j].slot()
	return a.due.Before(b.due) || a.due.Equal(b.due) && a.rank < b.rank
}
func (t *timers) Swap(i, j int) {
	t.h[i], t.h[j] = t.h[j], t.h[i]
	t.h[i].slot().idx, t.h[j].slot().idx = i+1, j+1
}

func (t *timers) Push(x any) {
	e := x.(Entry)
	t.h = append(t.h, e)
	s := e.slot()
	s.idx = len(t.h)
	if s.rank == 0 {
		t.ranks++
		s.rank = t.ranks
	}
}

func (t *timers) Pop() any {
	old := t.h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	t.h = old[:len(old)-1]
	e.slot().idx = 0
	return e
}

// next returns the entry due first and its Due; nil if none is.
func (t *timers) next() (Entry, time.Time) {
	if len(t.h) == 0 {
		return nil, time.Time{}
	}
	return t.h[0], t.h[0].slot().due
}

// fix reads e's Due once: the heap orders entries by the Due they had
// when last fixed, since an entry's Due may take a while to work out (a
// group member's, over its shards).
func (t *timers) fix(e Entry) {
	s := e.slot()
	due := e.Due()
	s.due = due
	switch {
	case due.IsZero() && s.idx > 0:
		heap.Remove(t, s.idx-1)
	case due.IsZero():
	case s.idx > 0:
		heap.Fix(t, s.idx-1)
	default:
		heap.Push(t, e)
	}
}

func (t *timers) remove(e Entry) {
	if s := e.slot(); s.idx > 0 {
		heap.Remove(t, s.idx-1)
	}
}
