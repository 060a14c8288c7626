package tenure_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease/natslease"
)

// TestIntegrationNATSRestartLosesATakeover: a NATS server whose stream
// files are put back, at a restart, to what they held before b took the
// lease, as a power loss leaves them when b's takeover (and a's last
// renewals) had not been flushed (sync_interval, two minutes by default).
//
// What holds: the next leader's token (c's, a process started after the
// loss) is above b's lost one, though no record of b's is left (every takeover on a Lossy store mints at least
// the wall time in ms); the fence refuses b once the next leader has
// written; b's renewal finds a revision it does not know and its term
// ends. What cannot be promised: b believes until that renewal; the test
// logs for how long after the restart.
func TestIntegrationNATSRestartLosesATakeover(t *testing.T) {
	srv := testservers.StartNATS(t, "")
	js := func(addr string) jetstream.JetStream {
		nc, err := nats.Connect("nats://"+addr, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		j, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	ctx := t.Context()
	if _, err := natslease.CreateBucket(ctx, js(srv.Addr), "leases", 1); err != nil {
		t.Fatal(err)
	}
	xa := testservers.NewProxy(t, srv.Addr)
	storeVia := func(addr string) *natslease.Store {
		kv, err := js(addr).KeyValue(ctx, "leases")
		if err != nil {
			t.Fatal(err)
		}
		s, _ := natslease.New(kv)
		return s
	}
	ev := newEvents()
	runLossy(t, storeVia(xa.Addr()), "a", ev)
	ea := ev.nextElected(t, e2eTakeover)
	if ea.id != "a" {
		t.Fatalf("%s elected first", ea.id)
	}

	// What the disk will hold after the loss: a's term, flushed by a clean
	// stop. a renews on once the server is back.
	srv.Stop()
	jsDir, snap := filepath.Join(srv.Dir, "js"), filepath.Join(t.TempDir(), "js")
	if err := os.CopyFS(snap, os.DirFS(jsDir)); err != nil {
		t.Fatal(err)
	}
	srv.Start()
	stopB := runLossy(t, storeVia(srv.Addr), "b", ev)
	ev.waitSeenAll(t, e2eTakeover, "b saw a")

	xa.Blackhole() // a goes silent; b waits out its lease
	eb, write := takeoverThenWrite(t, ev, ea)

	// The loss: the server dies, and its files are what was flushed.
	srv.Kill()
	if err := os.RemoveAll(jsDir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(jsDir, os.DirFS(snap)); err != nil {
		t.Fatal(err)
	}
	srv.Start()
	restarted := time.Now()

	d := ev.nextDemoted(t, e2eTakeover)
	for d.id == "a" { // a's term ended when it went silent
		d = ev.nextDemoted(t, e2eTakeover)
	}
	if d.id != "b" {
		t.Fatalf("%s demoted, want b", d.id)
	}
	// b leaves; c, a process that never saw b's token, takes the lease
	// once it has waited out a's record.
	stopB()
	runLossy(t, storeVia(srv.Addr), "c", ev)
	next := ev.nextElected(t, e2eTakeover)
	if next.term.Token <= eb.term.Token {
		t.Fatalf("%s's token %d is not above b's lost %d: tokens went back", next.id, next.term.Token, eb.term.Token)
	}
	if err := write(next.term); err != nil {
		t.Fatalf("%s's write: %v", next.id, err)
	}
	if err := write(eb.term); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("b's old term's write after the next leader's: %v, want it refused (%v)", err, fencing.ErrStaleToken)
	}
	t.Logf("b's takeover lost at the restart; b believed for %v after it (%v); %s elected %v after it, token %d > %d",
		d.at.Sub(restarted).Round(time.Millisecond), d.reason, next.id, next.at.Sub(restarted).Round(time.Millisecond), next.term.Token, eb.term.Token)
}
