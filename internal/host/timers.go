package host

import "container/heap"

// timers orders entries by their Due: a heap, so that a host of many
// locks finds the next wake-up in O(log n).
type timers []Entry

func (t timers) Len() int           { return len(t) }
func (t timers) Less(i, j int) bool { return t[i].Due().Before(t[j].Due()) }
func (t timers) Swap(i, j int) {
	t[i], t[j] = t[j], t[i]
	t[i].slot().idx, t[j].slot().idx = i+1, j+1
}

func (t *timers) Push(x any) {
	e := x.(Entry)
	*t = append(*t, e)
	e.slot().idx = len(*t)
}

func (t *timers) Pop() any {
	old := *t
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*t = old[:len(old)-1]
	e.slot().idx = 0
	return e
}

// next returns the entry due first; nil if none is.
func (t timers) next() Entry {
	if len(t) == 0 {
		return nil
	}
	return t[0]
}

func (t *timers) fix(e Entry) {
	s := e.slot()
	switch due := e.Due(); {
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
