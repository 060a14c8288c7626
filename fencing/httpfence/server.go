package httpfence

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/tenure-go/tenure/fencing"
)

// Mode says how the middleware holds the Guard while the handler runs.
type Mode int

const (
	// Exclusive runs each handler inside Guard.Do: one at a time. The
	// default, and right for any handler.
	Exclusive Mode = iota
	// Shared runs each handler inside Guard.DoShared: the current term's
	// handlers run concurrently; a newer term waits for them, then shuts
	// the older term out.
	Shared
	// ContextOnly checks nothing and puts the fence in the request's
	// context, for handlers whose every write is fenced downstream.
	ContextOnly
)

func (m Mode) String() string {
	switch m {
	case Exclusive:
		return "Exclusive"
	case Shared:
		return "Shared"
	case ContextOnly:
		return "ContextOnly"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Config configures Handler.
type Config struct {
	// Guard keeps the highest token accepted per lease. Share it with any
	// other code in the process that writes the same resource, so that all
	// writers are ordered together. Default: a new Guard of the handler's
	// own.
	Guard *fencing.Guard

	// Lease, if set, is the only lease whose requests are accepted; a
	// request that names another gets 409 (a *fencing.WrongLeaseError),
	// and one without Fencing-Lease is taken to name this one. Default "":
	// any lease, each with its own highest token, and every request must
	// send Fencing-Lease.
	Lease string

	// Mode says how the handler runs under the Guard. Default Exclusive.
	Mode Mode

	// AllowUnfenced passes requests without Fencing-Token to the handler
	// unchecked, with no fence in their context. Default false: they get
	// 428 Precondition Required.
	AllowUnfenced bool
}

func (c *Config) validate() error {
	if c.Guard == nil {
		c.Guard = new(fencing.Guard)
	}
	if c.Lease != "" {
		if err := (fencing.Fence{Lease: c.Lease, Token: 1}).Validate(); err != nil {
			return fmt.Errorf("httpfence: Config.Lease: %w", err)
		}
	}
	switch c.Mode {
	case Exclusive, Shared, ContextOnly:
		return nil
	}
	return fmt.Errorf("httpfence: Config.Mode is %v, want Exclusive, Shared or ContextOnly", c.Mode)
}

// Handler returns next wrapped in the fence check that Config describes. The
// handler finds the fence the request presented in the request's context
// (fencing.FromContext). See the package documentation for what each mode
// guarantees.
func Handler(cfg Config, next http.Handler) (http.Handler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if next == nil {
		return nil, errors.New("httpfence: nil handler")
	}
	return &handler{cfg: cfg, next: next}, nil
}

type handler struct {
	cfg  Config // validated; read only
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f, ok, err := ReadHeader(r.Header)
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	case !ok && h.cfg.AllowUnfenced:
		h.next.ServeHTTP(w, r)
		return
	case !ok:
		http.Error(w, fmt.Sprintf("httpfence: this resource accepts only fenced requests: send the writer's fence in the %s and %s headers", TokenHeader, LeaseHeader), http.StatusPreconditionRequired)
		return
	}
	switch {
	case f.Lease == "" && h.cfg.Lease == "":
		http.Error(w, fmt.Sprintf("httpfence: %s header missing (this server accepts several leases and must know which one the token belongs to)", LeaseHeader), http.StatusBadRequest)
		return
	case f.Lease == "":
		f.Lease = h.cfg.Lease
	case h.cfg.Lease != "" && f.Lease != h.cfg.Lease:
		// The token of another lease cannot be ordered against ours.
		refuse(w, &fencing.WrongLeaseError{Presented: f, Current: fencing.Fence{Lease: h.cfg.Lease, Token: h.cfg.Guard.Highest(h.cfg.Lease)}})
		return
	}

	r = r.WithContext(fencing.NewContext(r.Context(), f))
	serve := func() error {
		h.next.ServeHTTP(w, r)
		return nil
	}
	switch h.cfg.Mode {
	case Shared:
		err = h.cfg.Guard.DoShared(f.Lease, f.Token, serve)
	case ContextOnly:
		err = serve()
	default:
		err = h.cfg.Guard.Do(f.Lease, f.Token, serve)
	}
	if err != nil {
		refuse(w, err)
	}
}

// refuse answers 409 with the reason in the body and the server's fence in
// the headers, for CheckResponse.
func refuse(w http.ResponseWriter, err error) {
	var current fencing.Fence
	var se *fencing.StaleTokenError
	var we *fencing.WrongLeaseError
	switch {
	case errors.As(err, &se):
		current = fencing.Fence{Lease: se.Lease, Token: se.Current}
	case errors.As(err, &we):
		current = we.Current
	}
	if current.Lease != "" {
		w.Header().Set(LeaseHeader, current.Lease)
	}
	if current.Token != 0 {
		w.Header().Set(TokenHeader, current.Token.String())
	}
	http.Error(w, err.Error(), http.StatusConflict)
}
