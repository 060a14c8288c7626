package shell

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// LastAnswer is when the store last answered a call: with a record, a
// conflict or no record, not with an error.
type LastAnswer struct {
	mu sync.Mutex
	at time.Time // local time
}

// Note notes a call's answer, err, at clk's now.
func (a *LastAnswer) Note(clk interface{ Now() time.Time }, err error) {
	if err == nil || errors.Is(err, lease.ErrConflict) || errors.Is(err, lease.ErrNotFound) {
		now := clk.Now()
		a.mu.Lock()
		a.at = now
		a.mu.Unlock()
	}
}

// Get returns when the store last answered; zero before it did.
func (a *LastAnswer) Get() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.at
}

// Probes serves /livez, /readyz, /leader and /healthz (as /readyz) from
// check, which returns the answer and the JSON body for a probe.
func Probes(check func(probe string) (bool, any)) http.Handler {
	mux := http.NewServeMux()
	for _, p := range []string{"livez", "readyz", "leader", "healthz"} {
		mux.HandleFunc("GET /"+p, func(w http.ResponseWriter, _ *http.Request) {
			ok, body := check(p)
			writeJSON(w, ok, body)
		})
	}
	return mux
}

// Health decides a probe's answer.
func Health(running bool, answered, now time.Time, within time.Duration) (bool, string) {
	switch {
	case !running:
		return false, "not running"
	case answered.IsZero():
		return false, "no answer from the store yet"
	case now.Sub(answered) > within:
		return false, "no answer from the store for " + now.Sub(answered).Round(time.Millisecond).String()
	}
	return true, ""
}

func writeJSON(w http.ResponseWriter, ok bool, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}
