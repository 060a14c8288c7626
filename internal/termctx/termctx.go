// Package termctx runs a request under a leader's term as well as its own
// context: packages forward and forward/grpcforward serve requests so.
package termctx

import "context"

// Join returns ctx, cancelled with the term too (with the term's cause),
// and with the term's values where ctx has none (its fence, for
// fencing.FromContext). Call stop once the request is done.
func Join(ctx, term context.Context) (joined context.Context, stop func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	after := context.AfterFunc(term, func() { cancel(context.Cause(term)) })
	return values{cctx, term}, func() { after(); cancel(nil) }
}

// values is a context with the term's values beneath its own.
type values struct {
	context.Context
	term context.Context
}

func (c values) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.term.Value(key)
}
