//go:build unix

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/lease/redislease"
)

// held is one acquisition, as each library gives it: its token (tenure's;
// 0 for the others, which have none), whether its holder believes it
// still holds it (the library's own answer, as its users ask it), and how
// to give it back. keep runs while it is held: tenure renews by itself;
// redsync and redislock users extend or refresh on a timer, as here.
type held struct {
	token   uint64
	believe func() bool
	unlock  func(context.Context) error
	stop    func() // ends keep
}

// system acquires the lock for one library.
type system interface {
	acquire(ctx context.Context) (*held, error)
}

// counting counts the commands a go-redis client sends (each command of a
// pipeline too).
type counting struct{ n atomic.Int64 }

func (c *counting) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (c *counting) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}

func (c *counting) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// locker runs one process of the benchmark: it takes the lock, says so on
// stdout ("NS locked TOKEN"), writes to the resource every 10 ms while its
// library says it holds the lock ("NS write TOKEN"), says "NS over" when
// the library says it no longer does, gives the lock back on "u" on stdin
// ("NS unlocking" just before) and takes it again on "l", and answers SIGUSR1
// with "NS stats COMMANDS".
func locker(url, sysName, name, id string, ttl time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	opt, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	opt.MaxRetries, opt.ContextTimeoutEnabled = -1, true
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	var count counting
	rdb.AddHook(&count)
	var sys system
	switch sysName {
	case "tenure", "tenure-wake":
		store, err := redislease.New(rdb, redislease.Config{Prefix: "bench:"})
		if err != nil {
			return err
		}
		cfg := tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: id}, Timing: tenure.Timing{LeaseDuration: ttl}}
		if sysName == "tenure-wake" {
			cfg.WakeAddr = "127.0.0.1:0"
		}
		l, err := tenure.NewLocker(cfg)
		if err != nil {
			return err
		}
		defer l.Close()
		sys = tenureSys{l, name}
	case "redsync":
		sys = redsyncSys{redsync.New(redsyncgoredis.NewPool(rdb)), name, ttl}
	case "redislock":
		sys = redislockSys{redislock.New(rdb), name, ttl}
	default:
		return fmt.Errorf("unknown system %q", sysName)
	}
	say := func(format string, args ...any) {
		fmt.Printf("%d %s\n", time.Now().UnixNano(), fmt.Sprintf(format, args...))
	}
	usr := make(chan os.Signal, 1)
	signal.Notify(usr, syscall.SIGUSR1)
	go func() {
		for range usr {
			say("stats %d", count.n.Load())
		}
	}()
	cmds := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			cmds <- sc.Text()
		}
		close(cmds)
	}()
	say("started")
	for ctx.Err() == nil {
		h, err := sys.acquire(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		say("locked %d", h.token)
		tick := time.NewTicker(10 * time.Millisecond)
		believed := true
	hold:
		for {
			select {
			case <-ctx.Done():
				break hold
			case c, ok := <-cmds:
				if !ok || c == "q" {
					stop()
					break hold
				}
				if c == "u" {
					say("unlocking")
					break hold
				}
			case <-tick.C:
				// The resource is written only after the library said
				// the lock is held: the check a careful user makes.
				if believed = believed && h.believe(); believed {
					// The work between the check and the write, where a
					// pause (GC, SIGSTOP) lands about half the time.
					time.Sleep(5 * time.Millisecond)
					say("write %d", h.token)
				} else {
					say("over")
					// Lost: wait to be told to try again, as a
					// process would after an error.
					for c := range cmds {
						if c == "u" || c == "q" {
							break
						}
					}
					break hold
				}
			}
		}
		tick.Stop()
		h.stop()
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = h.unlock(uctx)
		cancel()
		// Out of the race until told to take part again ("l"): a
		// handoff measured is one to a waiter.
		for again := false; !again && ctx.Err() == nil; {
			select {
			case c, ok := <-cmds:
				again = ok && c == "l"
				if !ok || c == "q" {
					return nil
				}
			case <-ctx.Done():
			}
		}
	}
	return nil
}

type tenureSys struct {
	l    *tenure.Locker
	name string
}

func (s tenureSys) acquire(ctx context.Context) (*held, error) {
	h, err := s.l.Lock(ctx, s.name)
	if err != nil {
		return nil, err
	}
	return &held{token: uint64(h.Token()), believe: func() bool { return h.Context().Err() == nil }, unlock: h.Unlock, stop: func() {}}, nil
}

// redsyncSys: Mutex.Lock with the library's defaults (32 tries by default:
// here unbounded, as a waiter that must get the lock sets them; a retry
// every 50 to 250 ms at random), Extend every ttl/3, and Until for "do I
// still hold it".
type redsyncSys struct {
	rs   *redsync.Redsync
	name string
	ttl  time.Duration
}

func (s redsyncSys) acquire(ctx context.Context) (*held, error) {
	m := s.rs.NewMutex("bench:"+s.name, redsync.WithExpiry(s.ttl), redsync.WithTries(1<<30))
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	done := keep(s.ttl/3, func() { _, _ = m.Extend() })
	return &held{
		believe: func() bool { return time.Now().Before(m.Until()) },
		unlock:  func(ctx context.Context) error { _, err := m.UnlockContext(ctx); return err },
		stop:    done,
	}, nil
}

// redislockSys: Obtain with a linear backoff of 100 ms (its README's),
// asked again each time it gives up (after a TTL),
// Refresh every ttl/3, and the holder's own count of the TTL from its
// last refresh for "do I still hold it" (TTL asks the server: a round
// trip at every check).
type redislockSys struct {
	c    *redislock.Client
	name string
	ttl  time.Duration
}

func (s redislockSys) acquire(ctx context.Context) (*held, error) {
	// Obtain gives up after a TTL when ctx has no deadline: a waiter that
	// must have the lock asks again.
	var l *redislock.Lock
	var start time.Time
	for l == nil {
		start = time.Now()
		var err error
		l, err = s.c.Obtain(ctx, "bench:"+s.name, s.ttl, &redislock.Options{RetryStrategy: redislock.LinearBackoff(100 * time.Millisecond)})
		if err != nil && (ctx.Err() != nil || !errors.Is(err, redislock.ErrNotObtained) && !errors.Is(err, context.DeadlineExceeded)) {
			return nil, err
		}
	}
	var until atomic.Int64
	until.Store(start.Add(s.ttl).UnixNano())
	done := keep(s.ttl/3, func() {
		at := time.Now()
		if l.Refresh(context.Background(), s.ttl, nil) == nil {
			until.Store(at.Add(s.ttl).UnixNano())
		}
	})
	return &held{
		believe: func() bool { return time.Now().UnixNano() < until.Load() },
		unlock:  l.Release,
		stop:    done,
	}, nil
}

// keep calls f every d until the returned func is called.
func keep(d time.Duration, f func()) func() {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				f()
			}
		}
	}()
	return func() { close(quit); <-done }
}
