// Package httpfence carries fences over HTTP: a client RoundTripper that sends
// the writer's fence in request headers, and server middleware that checks it
// before the handler runs, so that a service can refuse the writes of a leader
// whose term is over.
//
// # Headers
//
// A fenced request carries
//
//	Fencing-Token: 7           the term's token, in decimal (fencing.Token.String)
//	Fencing-Lease: jobs/cron   the lease the writer leads
//
// The names follow RFC 6648 (no "X-" prefix). A refusal is 409 Conflict with a
// text/plain body that says why (for example `fencing: lease "jobs/cron":
// token 6 is stale, token 7 was already accepted`) and the same two headers
// naming the fence the server holds; CheckResponse turns it back into a
// *fencing.StaleTokenError or *fencing.WrongLeaseError. A request without
// Fencing-Token gets 428 Precondition Required unless Config.AllowUnfenced is
// set; a malformed one gets 400 Bad Request.
//
// # Guarantees (server)
//
//  1. In the default mode, Exclusive, the handler runs inside Guard.Do: the
//     token check, the advance and everything the handler does happen while
//     the Guard is held, so no request of an older term runs after one of a
//     newer term has started. Handlers run one at a time.
//  2. In Shared mode the handler runs inside Guard.DoShared: handlers of the
//     current term run concurrently, and a newer term's first request waits
//     for them to finish and then shuts the older term out. The ordering is
//     the same as Exclusive's; handlers must be safe to run concurrently.
//  3. In ContextOnly mode the middleware checks nothing: it parses the fence
//     and puts it in the request's context (fencing.FromContext), for a
//     handler that fences its own writes downstream (dynamofence, s3fence,
//     sqlfence). Use it only if every write the handler makes is fenced
//     there.
//
// The trade-off: checking the token and then running the handler outside
// the Guard would let a request of an old term pass the check, stall, and
// write after a newer term's request: the check-then-act race fencing exists
// to close. So the handler's side effects must happen under the Guard, which
// serializes handlers (Exclusive) or at least separates terms (Shared).
// Exclusive is the default because it is right for any handler; choose
// Shared for throughput when handlers are safe to run concurrently. A slow
// request holds the Guard for as long as its handler runs, reading the body
// included: bound it with the server's ReadTimeout and the handler's own
// timeouts.
//
// A Guard lives in one process: several replicas of a service each need their
// own fence, or a shared resource fenced by its own means (dynamofence,
// s3fence, sqlfence).
package httpfence

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/tenure-go/tenure/fencing"
)

// Header names.
const (
	TokenHeader = "Fencing-Token"
	LeaseHeader = "Fencing-Lease"
)

// ErrUnfenced is what CheckResponse returns for a 428 Precondition Required:
// the server accepts only fenced requests and this one carried no fence.
var ErrUnfenced = errors.New("httpfence: the server refused a request without a fence (428 Precondition Required)")

// Transport is an http.RoundTripper that adds the fence carried by each
// request's context (fencing.FromContext) as the Fencing-Token and
// Fencing-Lease headers, replacing any set by hand. A request whose context
// carries no fence is sent as it is: a fenced server refuses it with 428
// unless it allows unfenced requests, so a write cannot slip through
// unfenced by mistake, and reads through the same client need no fence.
//
// It does not interpret responses (an http.RoundTripper must not); use
// CheckResponse. It is safe for concurrent use.
type Transport struct {
	// Base sends the requests. Default: http.DefaultTransport.
	Base http.RoundTripper
}

var _ http.RoundTripper = (*Transport)(nil)

// RoundTrip implements http.RoundTripper. It sends a copy of req with the
// headers set and leaves req itself unchanged. An invalid fence
// (fencing.Fence.Validate) is an error and sends nothing.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	f, ok := fencing.FromContext(req.Context())
	if !ok {
		return base.RoundTrip(req)
	}
	if err := f.Validate(); err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on errors
		}
		return nil, fmt.Errorf("httpfence: %s %s: %w", req.Method, req.URL.Redacted(), err)
	}
	if err := fencing.Err(req.Context()); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("httpfence: %s %s: %v: term over, not sent: %w", req.Method, req.URL.Redacted(), f, err)
	}
	out := req.Clone(req.Context())
	SetHeader(out.Header, f)
	return base.RoundTrip(out)
}

// SetHeader sets the Fencing-Token and Fencing-Lease headers of h to f, for
// clients that build requests without Transport.
func SetHeader(h http.Header, f fencing.Fence) {
	h.Set(TokenHeader, f.Token.String())
	h.Set(LeaseHeader, f.Lease)
}

// ReadHeader returns the fence in h. ok is false when h has no Fencing-Token;
// a Fencing-Lease without it is an error, as are a malformed token, repeated
// headers and an invalid lease name. If h has no Fencing-Lease, the fence's
// Lease is empty: the server's Config.Lease then names it.
func ReadHeader(h http.Header) (f fencing.Fence, ok bool, err error) {
	toks, leases := h.Values(TokenHeader), h.Values(LeaseHeader)
	switch {
	case len(toks) == 0 && len(leases) == 0:
		return fencing.Fence{}, false, nil
	case len(toks) == 0:
		return fencing.Fence{}, false, fmt.Errorf("httpfence: %s header without %s", LeaseHeader, TokenHeader)
	case len(toks) > 1 || len(leases) > 1:
		return fencing.Fence{}, false, fmt.Errorf("httpfence: repeated %s or %s header", TokenHeader, LeaseHeader)
	}
	tok, err := fencing.ParseToken(toks[0])
	if err != nil {
		return fencing.Fence{}, false, fmt.Errorf("httpfence: %s header: %w", TokenHeader, err)
	}
	f = fencing.Fence{Token: tok}
	if len(leases) == 1 {
		f.Lease = leases[0]
		if err := f.Validate(); err != nil {
			return fencing.Fence{}, false, fmt.Errorf("httpfence: %s header: %w", LeaseHeader, err)
		}
	}
	return f, true, nil
}

// CheckResponse reports whether resp is a fencing refusal by a server using
// Handler: a *fencing.StaleTokenError or *fencing.WrongLeaseError for a 409
// that carries the server's Fencing-Lease header, ErrUnfenced for a 428, and
// nil for any other response, a 409 of the application's own included. It
// reads only the status and headers, never the body.
func CheckResponse(resp *http.Response) error {
	switch resp.StatusCode {
	case http.StatusPreconditionRequired:
		return ErrUnfenced
	case http.StatusConflict:
	default:
		return nil
	}
	current := fencing.Fence{Lease: resp.Header.Get(LeaseHeader)}
	if current.Lease == "" {
		return nil // not the middleware's 409
	}
	if tok, err := fencing.ParseToken(resp.Header.Get(TokenHeader)); err == nil {
		current.Token = tok // absent when the server had accepted nothing yet
	}
	var presented fencing.Fence
	if req := resp.Request; req != nil {
		if p, ok, err := ReadHeader(req.Header); err == nil && ok {
			presented = p
		} else if p, ok := fencing.FromContext(req.Context()); ok {
			presented = p
		}
	}
	if presented.Lease == "" {
		presented.Lease = current.Lease
	}
	if err := fencing.Check(current, presented); err != nil {
		return err
	}
	// The server refused although what it says it holds admits our fence:
	// it moved on after answering, or we cannot tell what we sent.
	return &fencing.StaleTokenError{Lease: presented.Lease, Presented: presented.Token}
}
