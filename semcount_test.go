package tenure_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/filelease"
	"github.com/tenure-go/tenure/lease/memlease"
	"github.com/tenure-go/tenure/lease/storeurl"
)

// TestIntegrationSemaphoreCountLost: the count record of a semaphore held
// by two holders of Slots(2) is deleted, or released by force (tenure
// release --force NAME::slots): a caller asking for 3 is not given a slot
// beside them (TryLock busy, Lock waits), and gets one once they left (the
// semaphore drained), after which n is 3. On every store.
func TestIntegrationSemaphoreCountLost(t *testing.T) {
	check := func(t *testing.T, store lease.Store) {
		for _, release := range []bool{false, true} {
			semaphoreCountLost(t, store, release)
		}
	}
	t.Run("mem", func(t *testing.T) { t.Parallel(); check(t, memlease.New()) })
	t.Run("file", func(t *testing.T) {
		t.Parallel()
		s, err := filelease.New(filepath.Join(t.TempDir(), "leases"))
		if err != nil {
			t.Fatal(err)
		}
		check(t, s)
	})
	onEveryStore(t, "tenure-semcount", check)
	byURL := func(name, url string) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := storeurl.Open(t.Context(), url)
			if err != nil {
				t.Fatal(err)
			}
			check(t, s)
		})
	}
	byURL("postgres", testservers.Postgres(t)+"&create=true&table="+strings.ReplaceAll(testservers.UniqueName("semcount"), "-", "_")) // a table name: no "-"
	byURL("etcd", "etcd://"+testservers.Etcd(t)+"/"+testservers.UniqueName("semcount")+"/")
	byURL("gcs", "gs://"+testservers.UniqueName("semcount")+"/tenure/?create=true&project=test&endpoint="+testservers.GCS(t))
	t.Run("azblob", func(t *testing.T) { // not in parallel: its key comes from the environment
		srv := testservers.Azurite(t)
		t.Setenv("AZURE_STORAGE_KEY", srv.Key)
		s, err := storeurl.Open(t.Context(), "azblob://"+srv.Account+"/"+testservers.UniqueName("semcount")+"/tenure/?create=true&endpoint="+srv.Endpoint)
		if err != nil {
			t.Fatal(err)
		}
		check(t, s)
	})
}

func semaphoreCountLost(t *testing.T, store lease.Store, release bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := "sem/deleted"
	if release {
		name = "sem/released"
	}
	locker := func(id string) *tenure.Locker {
		l, err := tenure.NewLocker(tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: id}, Timing: tenure.Timing{LeaseDuration: e2eLease, OpTimeout: time.Second, RetryMax: 200 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	a, b, c := locker("a"), locker("b"), locker("c")
	ha, err := a.TryLock(ctx, name, tenure.Slots(2))
	if err != nil {
		t.Fatal(err)
	}
	hb, err := b.TryLock(ctx, name, tenure.Slots(2))
	if err != nil {
		t.Fatal(err)
	}
	count := name + "::slots"
	rec, ver, err := store.Get(ctx, count)
	if err != nil {
		t.Fatal(err)
	}
	if release { // as tenure release --force writes it
		rec.Released, rec.Token, rec.Nonce = true, rec.Token+1, "forced"
		if _, err := store.Put(ctx, count, rec, ver); err != nil {
			t.Fatal(err)
		}
	} else if err := store.(lease.Deleter).Delete(ctx, count, ver); err != nil {
		t.Fatal(err)
	}
	if h, err := c.TryLock(ctx, name, tenure.Slots(3)); !errors.Is(err, tenure.ErrLocked) {
		if err == nil {
			t.Fatalf("released %v: TryLock(Slots(3)) took slot %d beside 2 holders of Slots(2), want it busy", release, h.Slot())
		}
		t.Fatalf("released %v: TryLock(Slots(3)) beside 2 holders of Slots(2): %v, want it busy", release, err)
	}
	wait, stop := context.WithTimeout(ctx, e2eLease+time.Second) // past a's and b's renewals
	h, err := c.Lock(wait, name, tenure.Slots(3))
	stop()
	if err == nil {
		t.Fatalf("released %v: Lock(Slots(3)) granted slot %d beside 2 holders of Slots(2)", release, h.Slot())
	}
	// A holder's term that ended here says why: lost (ReasonLost: its slot
	// record was written by another) is the bug this test guards; expired
	// or store unavailable would be renewals that did not land within the
	// lease on a loaded machine.
	if ha.Context().Err() != nil || hb.Context().Err() != nil {
		t.Fatalf("released %v: a holder lost its slot: %v, %v", release, context.Cause(ha.Context()), context.Cause(hb.Context()))
	}
	for _, h := range []*tenure.Lock{ha, hb} {
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	hc, err := c.Lock(ctx, name, tenure.Slots(3)) // drained: n is now 3
	if err != nil {
		t.Fatalf("released %v: Lock(Slots(3)) once the holders left: %v", release, err)
	}
	if _, err := a.TryLock(ctx, name, tenure.Slots(2)); !errors.Is(err, tenure.ErrSlotsMismatch) {
		t.Fatalf("released %v: Slots(2) once n is 3: %v", release, err)
	}
	if err := hc.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
