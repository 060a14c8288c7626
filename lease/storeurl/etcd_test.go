package storeurl_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/storeurl"
)

// answered is a store that notes when a call last worked.
type answered struct {
	lease.Store
	okc  chan struct{} // a call worked
	mu   sync.Mutex
	last time.Time
	err  error // the last call's error
}

func (a *answered) note(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.err = err
	if err == nil {
		a.last = time.Now()
		select {
		case a.okc <- struct{}{}:
		default:
		}
	}
}

func (a *answered) since(t time.Time) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last.After(t), a.err
}

// TestIntegrationEtcdRecovers: etcd behind a proxy goes away (refused,
// then black-holed) while a caller keeps calling every poll (600ms, a 3s
// lease's): once it is back, a call works within a round trip and a poll
// or two, not after gRPC's reconnect backoff has grown to seconds, and
// the errors meanwhile say what failed, not only that time ran out.
func TestIntegrationEtcdRecovers(t *testing.T) {
	proxy := testservers.NewProxy(t, testservers.Etcd(t))
	s, err := storeurl.Open(t.Context(), "etcd://"+proxy.Addr()+"/"+testservers.UniqueName("recover")+"/")
	if err != nil {
		t.Fatal(err)
	}
	a := &answered{Store: s, okc: make(chan struct{}, 1)}
	poll := func(stop <-chan struct{}) {
		tick := time.NewTicker(600 * time.Millisecond)
		defer tick.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond) // a 3s lease's op timeout
			_, _, err := a.Get(ctx, "x")
			cancel()
			if errors.Is(err, lease.ErrNotFound) {
				err = nil
			}
			a.note(err)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { poll(stop) })
	defer func() { close(stop); wg.Wait() }()

	for _, c := range []struct {
		name      string
		down, up  func()
		outage    time.Duration
		wantCause string
	}{
		{"refused", proxy.Down, func() {
			if err := proxy.Up(); err != nil {
				t.Fatal(err)
			}
		}, 12 * time.Second, "connection refused"},
		{"black-holed", proxy.Blackhole, proxy.Pass, 8 * time.Second, ""},
	} {
		c.down()
		<-time.After(c.outage) // the outage's length: the fault itself
		_, err := a.since(time.Now().Add(-time.Second))
		if c.wantCause != "" && (err == nil || !strings.Contains(err.Error(), c.wantCause)) {
			t.Errorf("%s: the error during the outage: %v; want it to say %q", c.name, err, c.wantCause)
		}
		back := time.Now()
		c.up()
		giveUp := time.After(30 * time.Second)
		for ok := false; !ok; ok, _ = a.since(back) {
			select {
			case <-a.okc:
			case <-giveUp:
				t.Fatalf("%s: no call worked within 30s of etcd coming back", c.name)
			}
		}
		took := time.Since(back)
		t.Logf("%s for %v: the first call worked %v after etcd was back", c.name, c.outage, took.Round(time.Millisecond))
		if took > 2*time.Second {
			t.Errorf("%s: the first call worked %v after etcd was back; want a round trip and a poll or two", c.name, took)
		}
	}
}
