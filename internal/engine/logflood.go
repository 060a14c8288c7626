package engine

import (
	"context"
	"log/slog"
	"regexp"
	"sync"
	"time"
)

// floodEvery is how often, at most, one kind of warning or error is logged:
// a store that goes away mid-run is seen at every step, by every lease and
// lock of a process.
const floodEvery = 10 * time.Second

// FloodGuard keeps repeated warnings and errors from flooding the log: one
// of a kind (its message, and its error's text with numbers and request
// IDs taken out) is logged at once, then at most once per floodEvery, with
// how many of its kind were held back since ("repeated"). Debug and info
// lines pass. The zero FloodGuard is ready.
type FloodGuard struct {
	mu    sync.Mutex // guards kinds
	kinds map[string]*floodKind
}

type floodKind struct {
	at   time.Time // last logged
	held int       // held back since
}

// varying matches what changes between two errors of one kind: numbers
// (durations, addresses' ports, tokens) and hex IDs (AWS request IDs).
var varying = regexp.MustCompile(`[0-9a-fA-F]{8,}(-[0-9a-fA-F]{4,})*|[0-9]+`)

// Log logs msg through lg at level, unless its kind was logged within
// floodEvery of now.
func (g *FloodGuard) Log(lg *slog.Logger, now time.Time, level slog.Level, msg string, args ...any) {
	if lg == nil {
		return
	}
	if level >= slog.LevelWarn {
		held, ok := g.pass(now, floodKey(msg, args))
		if !ok {
			return
		}
		if held > 0 {
			args = append(args, "repeated", held)
		}
	}
	lg.Log(context.Background(), level, msg, args...)
}

// pass reports whether a line of kind may be logged at now, and how many
// of its kind were held back before it.
func (g *FloodGuard) pass(now time.Time, kind string) (held int, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.kinds == nil {
		g.kinds = map[string]*floodKind{}
	}
	k := g.kinds[kind]
	if k != nil && now.Sub(k.at) < floodEvery && !now.Before(k.at) {
		k.held++
		return 0, false
	}
	if len(g.kinds) >= 256 { // kinds come and go: forget the quiet ones
		for key, o := range g.kinds {
			if now.Sub(o.at) >= floodEvery {
				delete(g.kinds, key)
			}
		}
	}
	if k == nil {
		k = new(floodKind)
		g.kinds[kind] = k
	}
	held, k.at, k.held = k.held, now, 0
	return held, true
}

// floodKey is the kind of a line: its message, and its error's text with
// what varies between errors of one kind taken out.
func floodKey(msg string, args []any) string {
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == "err" {
			if err, ok := args[i+1].(error); ok && err != nil {
				return msg + "\x00" + varying.ReplaceAllString(err.Error(), "#")
			}
		}
	}
	return msg
}
