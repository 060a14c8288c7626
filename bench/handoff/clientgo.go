//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/tenure-go/tenure/internal/benchkit"
	"github.com/tenure-go/tenure/lease/k8slease"
)

// cgTiming is client-go's: LeaseDuration, RenewDeadline, RetryPeriod.
type cgTiming struct{ lease, renewDeadline, retry time.Duration }

// clientgoCandidate runs client-go's leaderelection (ReleaseOnCancel, as
// its docs advise for handoffs) on a Lease in the namespace of storeURL,
// reporting as candidate does: "elected 0" (no token), "over 0" and
// "demoted lost" when it stops leading, "stale N" after a pause, and its
// API requests on SIGUSR1. Once it has stopped leading it does not
// campaign again, as a process under leaderelection.RunOrDie exits.
func clientgoCandidate(storeURL, name, id string, cg cgTiming) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	klog.LogToStderr(false) // its renewal messages are not the bench's
	klog.SetOutput(io.Discard)
	var count benchkit.HTTPCount
	ns, cs, err := count.Client(storeURL)
	if err != nil {
		return err
	}
	say := func(format string, args ...any) {
		fmt.Printf("%d %s\n", time.Now().UnixNano(), fmt.Sprintf(format, args...))
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: k8slease.ObjectName(name), Namespace: ns},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
		LeaseDuration: cg.lease, RenewDeadline: cg.renewDeadline, RetryPeriod: cg.retry,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { say("elected 0") },
			OnStoppedLeading: func() { say("over 0"); say("demoted lost") },
		},
	})
	if err != nil {
		return err
	}
	onStats(say, func() (int64, int64) { return count.Gets.Load(), count.Puts.Load() })
	go probe(ctx, le.IsLeader, say)
	say("started")
	le.Run(ctx)
	<-ctx.Done()
	return nil
}

// probe asks leading() every millisecond; after a pause (the process was
// stopped: the ticks stopped for longer than 500 ms) it counts the answers
// that still say yes, until the first no, and says "stale N". The pause
// outlasts the lease, and the bench sees another elected before it
// resumes, so every yes is stale.
func probe(ctx context.Context, leading func() bool, say func(string, ...any)) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			// Not the tick's time: one sent before the pause waits in
			// the channel.
			if now := time.Now(); now.Sub(last) > 500*time.Millisecond {
				n := 0
				for end := time.Now().Add(10 * time.Second); leading() && time.Now().Before(end); n++ {
					time.Sleep(time.Millisecond)
				}
				say("stale %d", n)
			}
			last = time.Now()
		}
	}
}

// onStats answers SIGUSR1 with "stats GETS PUTS GOROUTINES CPU_NS".
func onStats(say func(string, ...any), counts func() (gets, puts int64)) {
	usr := make(chan os.Signal, 1)
	signal.Notify(usr, syscall.SIGUSR1)
	go func() {
		for range usr {
			var ru syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			gets, puts := counts()
			say("stats %d %d %d %d", gets, puts, runtime.NumGoroutine(), time.Duration(ru.Utime.Nano()+ru.Stime.Nano()))
		}
	}()
}
