package etcdlease_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/etcdlease"
)

// events collects what a Watch tells, for a test to wait on.
type events struct {
	mu   sync.Mutex
	got  []lease.Event
	more chan struct{} // size 1: something came
}

func (e *events) add(ev lease.Event) {
	e.mu.Lock()
	e.got = append(e.got, ev)
	e.mu.Unlock()
	select {
	case e.more <- struct{}{}:
	default:
	}
}

// await waits until pred holds of what came, failing the test after 30s.
func (e *events) await(t *testing.T, what string, pred func([]lease.Event) bool) {
	t.Helper()
	giveUp := time.After(30 * time.Second)
	for {
		e.mu.Lock()
		ok := pred(e.got)
		e.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-e.more:
		case <-giveUp:
			e.mu.Lock()
			defer e.mu.Unlock()
			t.Fatalf("no %s within 30s; events so far %+v", what, e.got)
		}
	}
}

// listening counts the events that say the watch listens from now.
func listening(evs []lease.Event) int {
	n := 0
	for _, ev := range evs {
		if ev.Version == lease.NoVersion {
			n++
		}
	}
	return n
}

func has(v lease.Version) func([]lease.Event) bool {
	return func(evs []lease.Event) bool {
		for _, ev := range evs {
			if ev.Version == v {
				return true
			}
		}
		return false
	}
}

// watchBehind starts a Watch of name through a proxy in front of etcd, and
// returns the store behind the proxy, a client straight to etcd, and what
// the watch tells; it waits for the watch to listen.
func watchBehind(t *testing.T, name string) (*testservers.Proxy, *etcdlease.Store, *clientv3.Client, *events) {
	proxy := testservers.NewProxy(t, testservers.Etcd(t))
	prefix := "/" + testservers.UniqueName("watch") + "/"
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{proxy.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	watched, err := etcdlease.New(c, etcdlease.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	direct := client(t, clientv3.Config{})
	store, err := etcdlease.New(direct, etcdlease.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	ev := &events{more: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = watched.Watch(ctx, name, ev.add) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	ev.await(t, "first event", func(evs []lease.Event) bool { return listening(evs) == 1 })
	return proxy, store, direct, ev
}

// A watch cut off from etcd resumes, once etcd is back, from the revision
// after its last event: a write made during the break is told (by its
// version), not skipped by a watch that starts over from now. (The etcd
// client resumes a stream broken by the network itself; Watch resumes one
// the server ended.)
func TestIntegrationWatchResumesAfterBreak(t *testing.T) {
	proxy, store, _, ev := watchBehind(t, "job")
	ctx := context.Background()
	v1, err := store.Put(ctx, "job", record("n1"), lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	ev.await(t, "event of the first write", has(v1))
	proxy.Down()
	v2, err := store.Put(ctx, "job", record("n2"), v1) // during the break
	if err != nil {
		t.Fatal(err)
	}
	if err := proxy.Up(); err != nil {
		t.Fatal(err)
	}
	ev.await(t, "event of the write made during the break", has(v2))
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if n := listening(ev.got); n != 1 {
		t.Errorf("the watch started over %d times; want it resumed, telling of the write it missed: %+v", n-1, ev.got)
	}
}

// A watch whose revision to resume from was compacted away while it was
// cut off starts over from now (and says so, by a first event), rather
// than asking for the compacted revision again for ever; then it tells of
// the writes that follow.
func TestIntegrationWatchStartsOverAfterCompaction(t *testing.T) {
	proxy, store, direct, ev := watchBehind(t, "job")
	ctx := context.Background()
	v, err := store.Put(ctx, "job", record("n1"), lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	ev.await(t, "event of the first write", has(v))
	proxy.Down()
	for i := range 3 { // writes the watch misses, then compacted away
		if v, err = store.Put(ctx, "job", record(fmt.Sprint("m", i)), v); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := direct.Get(ctx, "compact-marker")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	if err := proxy.Up(); err != nil {
		t.Fatal(err)
	}
	ev.await(t, "the watch starting over", func(evs []lease.Event) bool { return listening(evs) == 2 })
	after, err := store.Put(ctx, "job", record("n2"), v)
	if err != nil {
		t.Fatal(err)
	}
	ev.await(t, "event of a write after starting over", has(after))
}

func record(nonce string) lease.Record {
	return lease.Record{Holder: "a", Token: 1, Duration: 3 * time.Second, Nonce: nonce, WrittenAt: time.Now()}
}
