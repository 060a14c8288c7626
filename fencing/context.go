package fencing

import "context"

// Fence is what a writer presents to a fenced resource: the lease it leads
// and the token of its term.
type Fence struct {
	Lease string
	Token Token
}

type contextKey struct{}

// NewContext returns a copy of ctx that carries f. tenure puts the term's
// Fence into the context it passes to OnElected, so code far below can fence
// its writes without the term being threaded through every call.
func NewContext(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, contextKey{}, f)
}

// FromContext returns the Fence carried by ctx, if any.
func FromContext(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(contextKey{}).(Fence)
	return f, ok
}
