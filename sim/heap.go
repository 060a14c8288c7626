package sim

import "time"

// timeHeap is a min-heap of values ordered by (at, seq), four children to a
// node: half the levels of a binary heap, and the four keys a sift compares
// sit side by side in memory. Entries carry their keys, so that comparing
// follows no pointer. Both worlds keep their events in one.
type timeHeap[T any] struct{ h []timed[T] }

type timed[T any] struct {
	at  time.Duration
	seq uint64
	v   T
}

func (a *timed[T]) before(b *timed[T]) bool {
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}

func (q *timeHeap[T]) len() int { return len(q.h) }

func (q *timeHeap[T]) push(at time.Duration, seq uint64, v T) {
	q.h = append(q.h, timed[T]{at: at, seq: seq, v: v})
	h := q.h
	i := len(h) - 1
	e := h[i]
	for i > 0 {
		p := (i - 1) / 4
		if !e.before(&h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = e
}

// pop removes and returns the first value; the heap must not be empty.
func (q *timeHeap[T]) pop() T {
	h := q.h
	top := h[0].v
	n := len(h) - 1
	e := h[n]
	h[n] = timed[T]{}
	h = h[:n]
	q.h = h
	if n == 0 {
		return top
	}
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for k := c + 1; k < min(c+4, n); k++ {
			if h[k].before(&h[m]) {
				m = k
			}
		}
		if !h[m].before(&e) {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = e
	return top
}
