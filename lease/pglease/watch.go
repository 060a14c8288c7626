package pglease

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tenure-go/tenure/internal/relisten"
	"github.com/tenure-go/tenure/lease"
)

var _ lease.Watcher = (*Store)(nil)

// feedIdle is how long the listening connection may go without a
// notification before it is pinged, and how long the ping may take.
const feedIdle = 5 * time.Second

// Channel returns the NOTIFY channel of a table's writes:
// "tenure_" and 16 hex digits of the table name's SHA-256, so that any
// table name makes a channel name PostgreSQL accepts.
func Channel(table string) string {
	sum := sha256.Sum256([]byte(table))
	return "tenure_" + hex.EncodeToString(sum[:8])
}

// Watch implements lease.Watcher with LISTEN on the table's channel
// (Channel): every write and delete of a lease sends a NOTIFY at its
// commit. The watchers of one Store share one connection, held from the
// pool while any watches (a *sql.DB with the pgx driver,
// github.com/jackc/pgx/v5/stdlib); one that breaks is opened again, and the
// watchers told (what was sent meanwhile is lost: PostgreSQL keeps
// notifications only for connections that listen). A connection that goes
// silent (a NAT or firewall that dropped it sends no FIN and no RST) is
// found by a ping after 5s without a notification, which must be
// answered within 5s too, and then opened again: within 10s.
func (s *Store) Watch(ctx context.Context, name string, fn func(lease.Event)) error {
	if err := lease.CheckGet(ctx, name); err != nil {
		return err
	}
	db, ok := s.db.(*sql.DB)
	if !ok {
		return lease.Permanent(fmt.Errorf("watch lease %q: pglease.New was given a DB that cannot listen (%T): pass a *sql.DB with the pgx driver", name, s.db))
	}
	w := &watcher{ch: make(chan lease.Event, 16), err: make(chan error, 1)}
	if err := s.feed.add(name, w, func(ctx context.Context) { s.listen(ctx, db) }); err != nil {
		return fmt.Errorf("watch lease %q: %w", name, err)
	}
	defer s.feed.remove(name, w)
	for {
		select {
		case <-ctx.Done():
			return s.failed(ctx, "watch", name, ctx.Err())
		case err := <-w.err:
			return fmt.Errorf("watch lease %q: %w", name, err)
		case ev := <-w.ch:
			fn(ev)
		}
	}
}

// feed is a Store's one listening connection and who it tells.
type feed struct {
	mu   sync.Mutex
	subs map[string]map[*watcher]bool // by lease name
	n    int                          // watchers in subs
	stop context.CancelFunc           // ends the listener; nil while none runs
	done chan struct{}                // closed once the listener returned
	err  error                        // why the feed cannot work (permanent)
	on   bool                         // the listener listens now: a watcher that joins is told so at once
}

// watcher is one Watch call: its events, dropped when it falls 16 behind,
// and the error that ends it.
type watcher struct {
	ch  chan lease.Event
	err chan error
}

// add registers w for name, and starts the listener if none runs.
func (f *feed) add(name string, w *watcher, listen func(context.Context)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if f.subs == nil {
		f.subs = map[string]map[*watcher]bool{}
	}
	if f.subs[name] == nil {
		f.subs[name] = map[*watcher]bool{}
	}
	f.subs[name][w] = true
	f.n++
	if f.stop == nil {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		f.stop, f.done = cancel, done
		go func() {
			defer close(done)
			listen(ctx)
		}()
	} else if f.on {
		tell(w, lease.Event{}) // joins a feed that already listens
	}
	return nil
}

// listening says whether the listener listens; from false to true, every
// watcher is told, as a watcher that joins later is by add.
func (f *feed) listening(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on && !f.on {
		for _, ws := range f.subs {
			for w := range ws {
				tell(w, lease.Event{})
			}
		}
	}
	f.on = on
}

// remove unregisters w; the last watcher out stops the listener and waits
// for it, so that no goroutine outlives the Watch calls.
func (f *feed) remove(name string, w *watcher) {
	f.mu.Lock()
	delete(f.subs[name], w)
	if len(f.subs[name]) == 0 {
		delete(f.subs, name)
	}
	f.n--
	var done chan struct{}
	if f.n == 0 && f.stop != nil {
		f.stop()
		done, f.stop = f.done, nil
	}
	f.mu.Unlock()
	if done != nil {
		<-done
	}
}

// each calls do for every watcher of name, or of every name with "".
func (f *feed) each(name string, do func(*watcher)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for n, ws := range f.subs {
		if name == "" || n == name {
			for w := range ws {
				do(w)
			}
		}
	}
}

// fail ends every Watch with err, and every later one.
func (f *feed) fail(err error) {
	f.each("", func(w *watcher) {
		select {
		case w.err <- err:
		default:
		}
	})
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func tell(w *watcher, ev lease.Event) {
	select {
	case w.ch <- ev:
	default: // it lags: lost, as a feed may lose events
	}
}

// listen keeps a connection listening until ctx is done.
func (s *Store) listen(ctx context.Context, db *sql.DB) {
	var pause relisten.Backoff
	for {
		listened, err := s.listenOnce(ctx, db)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, lease.ErrPermanent) {
			s.feed.fail(err)
			return
		}
		if listened {
			pause.Reset()
		}
		if !pause.Wait(ctx) {
			return
		}
	}
}

// listenOnce takes a connection from the pool, listens on it and passes
// on what comes until it breaks or ctx is done. The connection goes back
// as broken, so that the pool never hands out one that listens.
func (s *Store) listenOnce(ctx context.Context, db *sql.DB) (listened bool, err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	defer s.feed.listening(false)
	_ = conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			err = lease.Permanent(fmt.Errorf("pglease: a change feed needs the pgx driver (github.com/jackc/pgx/v5/stdlib), not %T", dc))
			return driver.ErrBadConn
		}
		pc := sc.Conn()
		if _, err = pc.Exec(ctx, "LISTEN "+s.channel); err != nil {
			err = classify(err)
			return driver.ErrBadConn
		}
		listened = true
		s.feed.listening(true)
		for {
			n, werr := waitNotice(ctx, pc)
			if werr != nil {
				err = werr
				return driver.ErrBadConn
			}
			if n == nil {
				continue // quiet, and the server answers
			}
			name, ev, ok := parseNotice(n.Payload)
			if ok {
				s.feed.each(name, func(w *watcher) { tell(w, ev) })
			}
		}
	})
	return listened, err
}

// waitNotice waits for the next notification on pc. After feedIdle
// without one it pings the server, and returns nil if it answers within
// feedIdle: a connection a NAT forgot would otherwise wait for ever.
func waitNotice(ctx context.Context, pc *pgx.Conn) (*pgconn.Notification, error) {
	wctx, cancel := context.WithTimeout(ctx, feedIdle)
	n, err := pc.WaitForNotification(wctx)
	cancel()
	if err == nil || ctx.Err() != nil || !pgconn.Timeout(err) {
		return n, err
	}
	pctx, cancel := context.WithTimeout(ctx, feedIdle)
	defer cancel()
	if err := pc.Ping(pctx); err != nil {
		return nil, fmt.Errorf("the listening connection did not answer a ping within %v: %w", feedIdle, err)
	}
	return nil, nil
}

// parseNotice reads a notification's payload (see New): the lease's name
// and the event, with the record's term where the payload tells it.
func parseNotice(p string) (string, lease.Event, bool) {
	kind, rest, ok := strings.Cut(p, " ")
	if !ok {
		return "", lease.Event{}, false
	}
	v, rest, ok := strings.Cut(rest, " ")
	if !ok {
		return "", lease.Event{}, false
	}
	switch kind {
	case "w", "r": // a store that did not tell the record
		return rest, lease.Event{Version: lease.Version(v), Released: kind == "r"}, true
	case "d":
		return rest, lease.Event{}, true
	case "W", "R":
		f := strings.SplitN(rest, " ", 4)
		if len(f) != 4 {
			return "", lease.Event{}, false
		}
		tok, err1 := strconv.ParseUint(f[0], 10, 64)
		ns, err2 := strconv.ParseInt(f[1], 10, 64)
		holder, err3 := hex.DecodeString(f[2])
		if err1 != nil || err2 != nil || err3 != nil {
			return f[3], lease.Event{Version: lease.Version(v), Released: kind == "R"}, true
		}
		rec := lease.Record{Holder: string(holder), Token: tok, Duration: time.Duration(ns), Released: kind == "R"}
		return f[3], lease.Event{Version: lease.Version(v), Released: kind == "R", Record: &rec}, true
	}
	return "", lease.Event{}, false
}
