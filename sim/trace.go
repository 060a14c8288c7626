package sim

import (
	"bufio"
	"io"
	"strconv"
	"time"
)

// A trace is the sequence of everything observable that happened in a run:
// faults, store requests and their fate, terms, callbacks and writes to the
// resource. Every line goes into a running hash, and into text only when a
// writer was given, so that the fast tier pays for formatting only on demand.
// Lines carry only what both tiers observe the same way, so that a fast run
// and a real run of the same seed can be compared line by line.

type msg uint8

const (
	mFault       msg = iota + 1 // s: what the scheduler did
	mSend                       // a: request, b: op kind, c: token, s: expected version, t: flags
	mDrop                       // a: request, s: why it never reached the store
	mApply                      // a: request, b: op kind, c: outcome, d: token, s: version, t: holder
	mRecv                       // a: request, b: outcome, s: version or error
	mLost                       // a: request, s: why the answer never arrived
	mElected                    // a: token
	mDemoted                    // a: token, s: reason
	mOnElected                  // a: token
	mReturned                   // OnElected returned
	mOnDemoted                  // a: token, s: reason
	mDemotedDone                // OnDemoted returned
	mOnLeader                   // a: token, s: holder
	mCheck                      // a: token
	mWrite                      // a: token, b: fate, c: highest token accepted before
	mRunDone                    // s: Run's error, if any
	mViolation                  // a: invariant, s: message
)

// Outcomes of a store request (mApply, mRecv).
const (
	oOK = iota + 1
	oConflict
	oNotFound
	oError
)

// Fates of a write to the resource (mWrite).
const (
	wAccepted = iota + 1
	wRefused
	wStale // accepted with a stale token: an I3 violation
)

type line struct {
	what    msg
	a, b, c int64
	d       int64
	s, t    string
}

type tracer struct {
	h     uint64
	out   *bufio.Writer // nil: hash only
	buf   []byte
	lines int64
}

func newTracer(w io.Writer) *tracer {
	t := &tracer{h: 0x9e3779b97f4a7c15}
	if w != nil {
		t.out = bufio.NewWriterSize(w, 64<<10)
	}
	return t
}

func (t *tracer) add(now time.Duration, who string, l line) {
	t.lines++
	h := t.h
	h = mix(h, uint64(now))
	h = mixString(h, who)
	h = mix(h, uint64(l.what))
	h = mix(h, uint64(l.a))
	h = mix(h, uint64(l.b))
	h = mix(h, uint64(l.c))
	h = mix(h, uint64(l.d))
	h = mixString(h, l.s)
	h = mixString(h, l.t)
	t.h = h
	if t.out == nil {
		return
	}
	b := appendTime(t.buf[:0], now)
	b = append(b, ' ')
	if who == "" {
		who = "*"
	}
	b = append(b, who...)
	for n := len(who); n < 5; n++ {
		b = append(b, ' ')
	}
	b = append(b, ' ')
	b = l.format(b)
	b = append(b, '\n')
	t.buf = b
	_, _ = t.out.Write(b)
}

func (t *tracer) flush() {
	if t.out != nil {
		_ = t.out.Flush()
	}
}

// mix folds v into h (a multiply-xorshift step): cheap, and any change to
// any line changes the final hash with overwhelming probability.
func mix(h, v uint64) uint64 {
	h ^= v
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 31
	return h
}

func mixString(h uint64, s string) uint64 {
	h = mix(h, uint64(len(s)))
	for len(s) >= 8 {
		v := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		h = mix(h, v)
		s = s[8:]
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		v |= uint64(s[i]) << (8 * i)
	}
	return mix(h, v)
}

var opNames = [...]string{"", "get", "put"}
var outcomeNames = [...]string{"", "ok", "conflict", "not found", "error"}

func (l line) format(b []byte) []byte {
	num := func(b []byte, v int64) []byte { return strconv.AppendInt(b, v, 10) }
	req := func(b []byte) []byte { return num(append(b, '#'), l.a) }
	switch l.what {
	case mFault:
		b = append(b, l.s...)
	case mSend:
		b = append(b, "send "...)
		b = append(b, opNames[l.b]...)
		b = append(b, ' ')
		b = req(b)
		if l.b == 2 {
			b = append(b, " token="...)
			b = num(b, l.c)
			b = append(b, " expect="...)
			if l.s == "" {
				b = append(b, "none"...)
			} else {
				b = append(b, l.s...)
			}
			if l.t != "" {
				b = append(b, ' ')
				b = append(b, l.t...)
			}
		}
	case mDrop:
		b = append(b, "drop "...)
		b = req(b)
		b = append(b, ": "...)
		b = append(b, l.s...)
	case mApply:
		b = append(b, "store "...)
		b = append(b, opNames[l.b]...)
		b = append(b, ' ')
		b = req(b)
		b = append(b, ": "...)
		b = append(b, outcomeNames[l.c]...)
		if l.s != "" {
			b = append(b, ' ')
			b = append(b, l.s...)
		}
		if l.t != "" {
			b = append(b, " holder="...)
			b = append(b, l.t...)
			b = append(b, " token="...)
			b = num(b, l.d)
		}
	case mRecv:
		b = append(b, "recv "...)
		b = req(b)
		b = append(b, ": "...)
		b = append(b, outcomeNames[l.b]...)
		if l.s != "" {
			b = append(b, ' ')
			b = append(b, l.s...)
		}
	case mLost:
		b = append(b, "lose "...)
		b = req(b)
		b = append(b, ": "...)
		b = append(b, l.s...)
	case mElected:
		b = append(b, "ELECTED token="...)
		b = num(b, l.a)
	case mDemoted:
		b = append(b, "DEMOTED token="...)
		b = num(b, l.a)
		b = append(b, " ("...)
		b = append(b, l.s...)
		b = append(b, ')')
	case mOnElected:
		b = append(b, "OnElected token="...)
		b = num(b, l.a)
	case mReturned:
		b = append(b, "OnElected returned"...)
	case mOnDemoted:
		b = append(b, "OnDemoted token="...)
		b = num(b, l.a)
		b = append(b, " ("...)
		b = append(b, l.s...)
		b = append(b, ')')
	case mDemotedDone:
		b = append(b, "OnDemoted returned"...)
	case mOnLeader:
		b = append(b, "OnLeaderChange "...)
		if l.s == "" {
			b = append(b, "none"...)
		} else {
			b = append(b, l.s...)
			b = append(b, " token="...)
			b = num(b, l.a)
		}
	case mCheck:
		b = append(b, "check token="...)
		b = num(b, l.a)
	case mWrite:
		b = append(b, "write token="...)
		b = num(b, l.a)
		switch l.b {
		case wAccepted:
			b = append(b, ": accepted"...)
		case wRefused:
			b = append(b, ": refused, token "...)
			b = num(b, l.c)
			b = append(b, " already accepted"...)
		case wStale:
			b = append(b, ": ACCEPTED although token "...)
			b = num(b, l.c)
			b = append(b, " was accepted before"...)
		}
	case mRunDone:
		b = append(b, "Run returned"...)
		if l.s != "" {
			b = append(b, ": "...)
			b = append(b, l.s...)
		}
	case mViolation:
		b = append(b, "VIOLATION "...)
		b = append(b, Invariant(l.a).String()...)
		b = append(b, ": "...)
		b = append(b, l.s...)
	}
	return b
}
