package leasetest_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/memlease"
)

func rec(holder string, token uint64) lease.Record {
	return lease.Record{Holder: holder, Token: token, Duration: time.Second, Nonce: fmt.Sprintf("%s-%d", holder, token)}
}

// A Faults with nothing injected is an ordinary store.
func TestFaultsConformance(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) lease.Store { return leasetest.NewFaults(memlease.New()) })
}

func TestFaultsFailAll(t *testing.T) {
	ctx := t.Context()
	store := memlease.New()
	f := leasetest.NewFaults(store)
	v, err := f.Put(ctx, "x", rec("a", 1), lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}

	f.FailAll()
	for range 3 {
		_, _, err := f.Get(ctx, "x")
		if !errors.Is(err, leasetest.ErrInjected) || errors.Is(err, leasetest.ErrLostResponse) {
			t.Fatalf("Get after FailAll: %v, want only ErrInjected", err)
		}
		if got, want := err.Error(), `get lease "x": leasetest: injected fault`; got != want {
			t.Errorf("Get error = %q, want %q", got, want)
		}
		_, err = f.Put(ctx, "x", rec("b", 2), v)
		if !errors.Is(err, leasetest.ErrInjected) {
			t.Fatalf("Put after FailAll: %v, want ErrInjected", err)
		}
		if got, want := err.Error(), `put lease "x": leasetest: injected fault`; got != want {
			t.Errorf("Put error = %q, want %q", got, want)
		}
	}
	if got, gotV, _ := store.Get(ctx, "x"); !got.Equal(rec("a", 1)) || gotV != v {
		t.Fatalf("a failed Put reached the store: it holds %+v at %q", got, gotV)
	}
	if gets, puts := f.Counts(); gets != 3 || puts != 4 {
		t.Errorf("Counts() = %d, %d; want 3, 4 (failed calls count)", gets, puts)
	}

	f.Heal()
	if _, err := f.Put(ctx, "x", rec("b", 2), v); err != nil {
		t.Fatalf("Put after Heal: %v", err)
	}
}

func TestFaultsFailNext(t *testing.T) {
	ctx := t.Context()
	store := memlease.New()
	f := leasetest.NewFaults(store)

	f.FailNext(2)
	if _, _, err := f.Get(ctx, "x"); !errors.Is(err, leasetest.ErrInjected) {
		t.Fatalf("1st call: %v, want ErrInjected", err)
	}
	if _, err := f.Put(ctx, "x", rec("a", 1), lease.NoVersion); !errors.Is(err, leasetest.ErrInjected) {
		t.Fatalf("2nd call: %v, want ErrInjected", err)
	}
	if _, _, err := store.Get(ctx, "x"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("the failed Put reached the store: Get = %v", err)
	}
	if _, err := f.Put(ctx, "x", rec("a", 1), lease.NoVersion); err != nil {
		t.Fatalf("3rd call: %v, want success", err)
	}

	// A new count replaces the pending one, and 0 or Heal cancels it.
	f.FailNext(5)
	f.FailNext(1)
	if _, _, err := f.Get(ctx, "x"); !errors.Is(err, leasetest.ErrInjected) {
		t.Fatalf("after FailNext(5), FailNext(1): 1st Get: %v, want ErrInjected", err)
	}
	if _, _, err := f.Get(ctx, "x"); err != nil {
		t.Fatalf("after FailNext(5), FailNext(1): 2nd Get: %v, want success", err)
	}
	f.FailNext(3)
	f.FailNext(0)
	if _, _, err := f.Get(ctx, "x"); err != nil {
		t.Fatalf("after FailNext(0): %v", err)
	}
	f.FailNext(3)
	f.Heal()
	if _, _, err := f.Get(ctx, "x"); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}

func TestFaultsLosePutResponses(t *testing.T) {
	ctx := t.Context()
	store := memlease.New()
	f := leasetest.NewFaults(store)

	f.LosePutResponses(2)
	_, err := f.Put(ctx, "x", rec("a", 1), lease.NoVersion)
	if !errors.Is(err, leasetest.ErrLostResponse) || errors.Is(err, leasetest.ErrInjected) {
		t.Fatalf("Put: %v, want ErrLostResponse and not ErrInjected", err)
	}
	if got, want := err.Error(), `put lease "x": leasetest: response lost`; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	// The write applied although its caller was not told; Gets are not
	// affected and do not use up the count.
	got, v, err := f.Get(ctx, "x")
	if err != nil || !got.Equal(rec("a", 1)) {
		t.Fatalf("Get after a lost Put = %+v, %v; want the record written", got, err)
	}

	// A conflict's answer is lost too, and the store is unchanged.
	_, err = f.Put(ctx, "x", rec("b", 1), lease.NoVersion)
	if !errors.Is(err, leasetest.ErrLostResponse) || errors.Is(err, lease.ErrConflict) {
		t.Fatalf("conflicting Put: %v, want ErrLostResponse only", err)
	}
	if got, gotV, _ := store.Get(ctx, "x"); !got.Equal(rec("a", 1)) || gotV != v {
		t.Fatalf("store holds %+v at %q after a conflicting Put", got, gotV)
	}

	if _, err := f.Put(ctx, "x", rec("b", 2), v); err != nil {
		t.Fatalf("third Put: %v, want success once the count is used up", err)
	}

	f.LosePutResponses(1)
	f.Heal()
	if _, err := f.Put(ctx, "y", rec("a", 1), lease.NoVersion); err != nil {
		t.Fatalf("Put after Heal: %v", err)
	}
}

// A Put failed before the store is not one whose response was lost.
func TestFaultsFailNextBeforeLostResponse(t *testing.T) {
	ctx := t.Context()
	store := memlease.New()
	f := leasetest.NewFaults(store)
	f.FailNext(1)
	f.LosePutResponses(1)

	if _, err := f.Put(ctx, "x", rec("a", 1), lease.NoVersion); !errors.Is(err, leasetest.ErrInjected) {
		t.Fatalf("1st Put: %v, want ErrInjected", err)
	}
	if _, _, err := store.Get(ctx, "x"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("1st Put reached the store: %v", err)
	}
	if _, err := f.Put(ctx, "x", rec("a", 1), lease.NoVersion); !errors.Is(err, leasetest.ErrLostResponse) {
		t.Fatalf("2nd Put: %v, want ErrLostResponse", err)
	}
	if _, _, err := store.Get(ctx, "x"); err != nil {
		t.Fatalf("2nd Put did not reach the store: %v", err)
	}
}

func TestFaultsHook(t *testing.T) {
	ctx := t.Context()
	store := memlease.New()
	f := leasetest.NewFaults(store)
	errRefused := errors.New("refused")
	var calls []string
	f.SetHook(func(op, name string) error {
		calls = append(calls, op+" "+name)
		if op == "put" && name == "blocked" {
			return errRefused
		}
		return nil
	})

	_, err := f.Put(ctx, "blocked", rec("a", 1), lease.NoVersion)
	if !errors.Is(err, errRefused) {
		t.Fatalf("Put: %v, want the hook's error", err)
	}
	if got, want := err.Error(), `put lease "blocked": refused`; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	if _, _, err := store.Get(ctx, "blocked"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("a Put the hook refused reached the store: %v", err)
	}
	if _, _, err := f.Get(ctx, "blocked"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("Get: %v, want the store's ErrNotFound", err)
	}
	f.FailAll()
	if _, _, err := f.Get(ctx, "other"); !errors.Is(err, leasetest.ErrInjected) {
		t.Fatalf("Get under FailAll: %v", err)
	}
	f.Heal()
	if got, want := fmt.Sprint(calls), "[put blocked get blocked get other]"; got != want {
		t.Errorf("hook saw %s, want %s (every call, failed ones too)", got, want)
	}

	// The hook may reconfigure f, and that applies to the call at hand.
	f.SetHook(func(op, name string) error {
		f.FailAll()
		return nil
	})
	if _, _, err := f.Get(ctx, "x"); !errors.Is(err, leasetest.ErrInjected) {
		t.Fatalf("Get whose hook called FailAll: %v, want ErrInjected", err)
	}

	f.SetHook(nil)
	f.Heal()
	if _, err := f.Put(ctx, "blocked", rec("a", 1), lease.NoVersion); err != nil {
		t.Fatalf("Put after SetHook(nil): %v", err)
	}
	if gets, puts := f.Counts(); gets != 3 || puts != 2 {
		t.Errorf("Counts() = %d, %d; want 3, 2", gets, puts)
	}
}

// A hook may hold a call in flight while other calls go through.
func TestFaultsHookHoldsCall(t *testing.T) {
	ctx := t.Context()
	f := leasetest.NewFaults(memlease.New())
	entered, release := make(chan struct{}), make(chan struct{})
	f.SetHook(func(op, name string) error {
		if op == "put" {
			close(entered)
			<-release
		}
		return nil
	})
	var putErr error
	var wg sync.WaitGroup
	wg.Go(func() { _, putErr = f.Put(ctx, "x", rec("a", 1), lease.NoVersion) })

	<-entered
	if _, _, err := f.Get(ctx, "x"); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("Get while the Put is held: %v, want ErrNotFound", err)
	}
	if gets, puts := f.Counts(); gets != 1 || puts != 1 {
		t.Errorf("Counts() while the Put is held = %d, %d; want 1, 1", gets, puts)
	}
	close(release)
	wg.Wait()
	if putErr != nil {
		t.Fatalf("held Put: %v", putErr)
	}
	if _, _, err := f.Get(ctx, "x"); err != nil {
		t.Fatalf("Get after the Put: %v", err)
	}
}

// Concurrent calls share the counts: exactly n fail or lose their answer.
func TestFaultsConcurrent(t *testing.T) {
	ctx := t.Context()
	store := memlease.New()
	f := leasetest.NewFaults(store)
	const gets, puts, failN, loseN = 40, 30, 7, 5

	f.FailNext(failN)
	getErrs := make([]error, gets)
	var wg sync.WaitGroup
	for i := range gets {
		wg.Go(func() { _, _, getErrs[i] = f.Get(ctx, "missing") })
	}
	wg.Wait()
	injected := 0
	for _, err := range getErrs {
		switch {
		case errors.Is(err, leasetest.ErrInjected):
			injected++
		case !errors.Is(err, lease.ErrNotFound):
			t.Fatalf("Get: %v", err)
		}
	}
	if injected != failN {
		t.Errorf("%d of %d concurrent Gets failed after FailNext(%d)", injected, gets, failN)
	}

	f.LosePutResponses(loseN)
	putErrs := make([]error, puts)
	for i := range puts {
		wg.Go(func() { _, putErrs[i] = f.Put(ctx, fmt.Sprintf("l%d", i), rec("a", 1), lease.NoVersion) })
	}
	wg.Wait()
	lost := 0
	for i, err := range putErrs {
		if errors.Is(err, leasetest.ErrLostResponse) {
			lost++
		} else if err != nil {
			t.Fatalf("Put: %v", err)
		}
		if _, _, err := store.Get(ctx, fmt.Sprintf("l%d", i)); err != nil {
			t.Errorf("Put %d did not apply: %v", i, err)
		}
	}
	if lost != loseN {
		t.Errorf("%d of %d concurrent Puts lost their response after LosePutResponses(%d)", lost, puts, loseN)
	}
	if g, p := f.Counts(); g != gets || p != puts {
		t.Errorf("Counts() = %d, %d; want %d, %d", g, p, gets, puts)
	}
}

func TestFeedConformance(t *testing.T) {
	leasetest.Run(t, func(*testing.T) lease.Store { return leasetest.NewFeed(memlease.New()) })
}
