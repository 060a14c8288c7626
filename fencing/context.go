package fencing

import (
	"context"
	"errors"
	"fmt"

	"github.com/tenure-go/tenure/internal/fencekey"
)

// ErrNoFence reports that a context carries no Fence where a write needed one.
var ErrNoFence = errors.New("fencing: no fence in context (pass the context of OnElected, or NewContext)")

// MaxLeaseLen is the longest lease name a Fence may carry, in bytes: the
// longest lease name tenure accepts.
const MaxLeaseLen = 200

// Fence is what a writer presents to a fenced resource: the lease it leads
// and the token of its term. The zero Fence is no fence.
type Fence struct {
	Lease string
	Token Token
}

// String returns a form for logs: lease "jobs/cron" token 7.
func (f Fence) String() string { return fmt.Sprintf("lease %q token %d", f.Lease, f.Token) }

// Validate reports whether f can be presented: a token of at least 1 and a
// lease name of 1 to MaxLeaseLen bytes of printable ASCII without spaces, so
// that it travels unchanged in HTTP headers, S3 metadata and database
// columns. Every name lease.ValidateName accepts is valid here.
func (f Fence) Validate() error {
	if f.Token == 0 {
		return fmt.Errorf("fencing: %v: zero token (tokens start at 1)", f)
	}
	if f.Lease == "" || len(f.Lease) > MaxLeaseLen {
		return fmt.Errorf("fencing: %v: lease name is %d bytes, want 1 to %d", f, len(f.Lease), MaxLeaseLen)
	}
	for i := 0; i < len(f.Lease); i++ {
		if c := f.Lease[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("fencing: %v: byte %d (0x%02x) of the lease name is not printable ASCII", f, i, c)
		}
	}
	return nil
}

type contextKey = fencekey.Fence

// NewContext returns a copy of ctx that carries f. tenure puts the term's
// Fence into the context it passes to OnElected, so code far below can fence
// its writes without the term being threaded through every call; use
// NewContext where a fence arrives another way (httpfence's middleware puts
// the fence a request presented into the request's context).
func NewContext(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, contextKey{}, f)
}

// FromContext returns the Fence carried by ctx, if any. A context derived from
// the one OnElected received carries the term's fence; it stays there after
// the term's context is cancelled, because a write already under way must
// still present it. Whether the term still runs is Err's to say.
func FromContext(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(contextKey{}).(Fence)
	return f, ok
}

type termKey = fencekey.Term

// WithTerm returns a copy of ctx whose term ends when ended returns an
// error: Err reports it for ctx and every context derived from it. tenure
// uses it so that a term's end is seen at once, from any goroutine, even
// before the goroutine that cancels the term's context has run (as after a
// process pause). ended must be safe for concurrent use and cheap.
func WithTerm(ctx context.Context, ended func() error) context.Context {
	return context.WithValue(ctx, termKey{}, ended)
}

// Err reports whether the work running under ctx must stop: ctx.Err(), or
// else the end of the term ctx derives from (WithTerm), as its clock tells
// now. It is what the helpers of this package and its subpackages check
// before they act. A check and the action after it are still two steps: a
// pause between them can outlast the term, which is why the action carries
// the fence and the resource checks it.
func Err(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if ended, ok := ctx.Value(termKey{}).(func() error); ok {
		return ended()
	}
	return nil
}
