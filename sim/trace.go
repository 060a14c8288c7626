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
	mFault       msg = iota + 1 // text: what the scheduler did
	mSend                       // req, op, tok, text: expected version, flags
	mDrop                       // req, text: why it never reached the store
	mApply                      // req, op, code: outcome, tok, text: version, holder
	mRecv                       // req, code: outcome, text: version or error
	mLost                       // req, text: why the answer never arrived
	mElected                    // tok
	mDemoted                    // tok, text: reason
	mOnElected                  // tok
	mReturned                   // OnElected returned
	mOnDemoted                  // tok, text: reason
	mDemotedDone                // OnDemoted returned
	mOnLeader                   // tok, holder
	mCheck                      // tok
	mWrite                      // tok, code: fate, prev
	mRunDone                    // text: Run's error, if any
	mViolation                  // code: invariant, text: message
	mAct                        // text: an act of a user's code (simtest)
	mBroken                     // text: a user's world: a check that failed
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

// line is one trace line; which fields it uses depends on what (see msg).
type line struct {
	what   msg
	req    int64  // request number
	op     int64  // op kind: 1 get, 2 put
	tok    int64  // token
	code   int64  // outcome (mApply, mRecv), fate (mWrite), invariant (mViolation)
	prev   int64  // mWrite: the highest token accepted before
	text   string // what happened, a version, a reason, a message
	holder string // mApply: the record's holder; mOnLeader: the leader
	flags  string // mSend, mApply: "released", "stale", a plain record's name
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
	// what, op and code are small: one word holds them.
	h = mix(h, uint64(l.what)|uint64(l.op)<<8|uint64(l.code)<<16)
	h = mix(h, uint64(l.req))
	h = mix(h, uint64(l.tok))
	h = mix(h, uint64(l.prev))
	h = mixString(h, l.text)
	h = mixString(h, l.holder)
	h = mixString(h, l.flags)
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

func mixString[S ~string | ~[]byte](h uint64, s S) uint64 {
	h = mix(h, uint64(len(s)))
	if len(s) == 0 {
		return h
	}
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
	req := func(b []byte) []byte { return num(append(b, '#'), l.req) }
	switch l.what {
	case mFault:
		b = append(b, l.text...)
	case mSend:
		b = append(b, "send "...)
		b = append(b, opNames[l.op]...)
		b = append(b, ' ')
		b = req(b)
		if l.op == 2 {
			b = append(b, " token="...)
			b = num(b, l.tok)
			b = append(b, " expect="...)
			if l.text == "" {
				b = append(b, "none"...)
			} else {
				b = append(b, l.text...)
			}
		}
		if l.flags != "" {
			b = append(b, ' ')
			b = append(b, l.flags...)
		}
	case mDrop:
		b = append(b, "drop "...)
		b = req(b)
		b = append(b, ": "...)
		b = append(b, l.text...)
	case mApply:
		b = append(b, "store "...)
		b = append(b, opNames[l.op]...)
		b = append(b, ' ')
		b = req(b)
		b = append(b, ": "...)
		b = append(b, outcomeNames[l.code]...)
		if l.text != "" {
			b = append(b, ' ')
			b = append(b, l.text...)
		}
		if l.holder != "" {
			b = append(b, " holder="...)
			b = append(b, l.holder...)
			b = append(b, " token="...)
			b = num(b, l.tok)
		}
		if l.flags != "" {
			b = append(b, ' ')
			b = append(b, l.flags...)
		}
	case mRecv:
		b = append(b, "recv "...)
		b = req(b)
		b = append(b, ": "...)
		b = append(b, outcomeNames[l.code]...)
		if l.text != "" {
			b = append(b, ' ')
			b = append(b, l.text...)
		}
	case mLost:
		b = append(b, "lose "...)
		b = req(b)
		b = append(b, ": "...)
		b = append(b, l.text...)
	case mElected:
		b = append(b, "ELECTED token="...)
		b = num(b, l.tok)
	case mDemoted:
		b = append(b, "DEMOTED token="...)
		b = num(b, l.tok)
		b = append(b, " ("...)
		b = append(b, l.text...)
		b = append(b, ')')
	case mOnElected:
		b = append(b, "OnElected token="...)
		b = num(b, l.tok)
	case mReturned:
		b = append(b, "OnElected returned"...)
	case mOnDemoted:
		b = append(b, "OnDemoted token="...)
		b = num(b, l.tok)
		b = append(b, " ("...)
		b = append(b, l.text...)
		b = append(b, ')')
	case mDemotedDone:
		b = append(b, "OnDemoted returned"...)
	case mOnLeader:
		b = append(b, "OnLeaderChange "...)
		if l.holder == "" {
			b = append(b, "none"...)
		} else {
			b = append(b, l.holder...)
			b = append(b, " token="...)
			b = num(b, l.tok)
		}
	case mCheck:
		b = append(b, "check token="...)
		b = num(b, l.tok)
	case mWrite:
		b = append(b, "write token="...)
		b = num(b, l.tok)
		switch l.code {
		case wAccepted:
			b = append(b, ": accepted"...)
		case wRefused:
			b = append(b, ": refused, token "...)
			b = num(b, l.prev)
			b = append(b, " already accepted"...)
		case wStale:
			b = append(b, ": ACCEPTED although token "...)
			b = num(b, l.prev)
			b = append(b, " was accepted before"...)
		}
	case mRunDone:
		b = append(b, "Run returned"...)
		if l.text != "" {
			b = append(b, ": "...)
			b = append(b, l.text...)
		}
	case mViolation:
		b = append(b, "VIOLATION "...)
		b = append(b, Invariant(l.code).String()...)
		b = append(b, ": "...)
		b = append(b, l.text...)
	case mAct:
		b = append(b, "act: "...)
		b = append(b, l.text...)
	case mBroken:
		b = append(b, "FAILED: "...)
		b = append(b, l.text...)
	}
	return b
}
