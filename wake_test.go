package tenure

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/groupcore"
	"github.com/tenure-go/tenure/internal/shell"
	"github.com/tenure-go/tenure/lease/filelease"
	"github.com/tenure-go/tenure/lease/memlease"
)

// A store that only one host shares keeps wake-ups on loopback by default:
// a group's member on a file store publishes 127.0.0.1, not the host's
// outbound address.
func TestWakeOnLoopbackForOneHostStores(t *testing.T) {
	if got := shell.DefaultWakeAddr(memlease.New()); got != "127.0.0.1:0" {
		t.Errorf("memlease: %s", got)
	}
	store, err := filelease.New(filepath.Join(t.TempDir(), "leases"))
	if err != nil {
		t.Fatal(err)
	}
	assigned := make(chan struct{}, 1)
	g, err := NewGroup(GroupConfig{Store: store, Name: "g", Shards: 1, Runtime: Runtime{ID: "a"},
		OnAssigned: func(ctx context.Context, _ Shard) {
			select {
			case assigned <- struct{}{}:
			default:
			}
			<-ctx.Done()
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-assigned:
	case <-time.After(30 * time.Second):
		t.Fatal("no shard assigned within 30s")
	}
	rec, _, err := store.Get(ctx, "g"+groupcore.MembersSuffix)
	if err != nil {
		t.Fatal(err)
	}
	es, err := groupcore.Decode(rec.Payload)
	if err != nil || len(es) != 1 {
		t.Fatalf("membership %q: %v", rec.Payload, err)
	}
	host, _, err := net.SplitHostPort(es[0].Addr)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		t.Fatalf("the member publishes %q for wake-ups on a one-host store; want loopback", es[0].Addr)
	}
}
