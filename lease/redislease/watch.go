package redislease

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/recordjson"
	"github.com/tenure-go/tenure/internal/relisten"
	"github.com/tenure-go/tenure/lease"
)

// feedIdle is how long a subscription may go without a message before it
// is pinged, and how long the ping may take.
const feedIdle = 5 * time.Second

// Watch implements lease.Watcher with SUBSCRIBE to the lease's channel
// (named like its key), on a connection of its own. The client subscribes
// again by itself after the connection broke; each (re)subscription tells
// fn with NoVersion, since Pub/Sub kept nothing meanwhile. A connection
// that goes silent (a NAT that dropped it sends no RST) is found by a ping
// after 5s without a message, which must be answered within 5s too, and
// is then opened again: within 10s.
func (s *Store) Watch(ctx context.Context, name string, fn func(lease.Event)) error {
	if err := lease.CheckGet(ctx, name); err != nil {
		return err
	}
	var pause relisten.Backoff
	for {
		err := s.subscribe(ctx, name, fn, &pause)
		if ctx.Err() != nil {
			return s.failed(ctx, "watch", name, ctx.Err())
		}
		if err = s.failed(ctx, "watch", name, err); errors.Is(err, lease.ErrPermanent) {
			return err
		}
		if !pause.Wait(ctx) { // unreachable, or failing: less and less often
			return s.failed(ctx, "watch", name, ctx.Err())
		}
	}
}

// subscribe listens on one subscription until it fails, and returns why.
func (s *Store) subscribe(ctx context.Context, name string, fn func(lease.Event), pause *relisten.Backoff) error {
	key := s.Key(name)
	ps := s.c.Subscribe(ctx, key)
	defer ps.Close()
	// A read in flight may not heed ctx (the client sets its deadline from
	// the timeout given); closing the subscription ends it at once.
	stop := context.AfterFunc(ctx, func() { ps.Close() })
	defer stop()
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, feedIdle)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil && !pinged {
				pinged = true
				if err := ps.Ping(ctx); err != nil {
					return err
				}
				continue
			}
			return err // broken, or the ping went unanswered: open a new one
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" && m.Channel == key {
				pause.Reset()
				fn(lease.Event{}) // listening from now: what came before, a read finds
			}
		case *redis.Message:
			if m.Channel == key {
				fn(s.event(name, m.Payload))
			}
		}
	}
}

// event decodes a message the scripts publish: "VERSION RECORD-JSON" for
// a write, "-" for a deletion. One that does not decode tells of a write
// without saying what.
func (s *Store) event(name, payload string) lease.Event {
	v, r, ok := strings.Cut(payload, " ")
	if !ok {
		return lease.Event{}
	}
	e := lease.Event{Version: lease.Version(v)}
	if rec, err := recordjson.Decode(name, []byte(r)); err == nil {
		e.Record, e.Released = &rec, rec.Released
	}
	return e
}
