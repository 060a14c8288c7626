package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// LeaderLabel is the label a PodLabel puts on the leader's Pod, with the
// value "true".
const LeaderLabel = "tenure.dev/leader"

// unlabelWait bounds taking the label off when a term ends: the next
// campaign waits for it (callbacks return before a new term).
const unlabelWait = 5 * time.Second

// Pods is what a PodLabel asks of the API server about its Pod: a JSON
// merge patch, and its labels as they stand.
type Pods interface {
	Patch(ctx context.Context, pod types.NamespacedName, patch []byte) error
	Labels(ctx context.Context, pod types.NamespacedName) (map[string]string, error)
}

// PodLabel keeps LeaderLabel on a Pod while the process in it leads
// (lease/k8slease's PodLabel says what it promises).
type PodLabel struct {
	pods Pods
	pod  types.NamespacedName
	log  *slog.Logger

	mu   sync.Mutex
	stop context.CancelFunc // ends the labelling of the current term
	done chan struct{}      // closed when it has ended
}

// PodFromEnv returns the Pod named by POD_NAMESPACE and POD_NAME, as the
// Downward API sets them.
func PodFromEnv() (types.NamespacedName, error) {
	pod := types.NamespacedName{Namespace: os.Getenv("POD_NAMESPACE"), Name: os.Getenv("POD_NAME")}
	if pod.Namespace == "" || pod.Name == "" {
		return pod, errors.New("POD_NAME and POD_NAMESPACE must name this Pod: set them from the Downward API (valueFrom: fieldRef: fieldPath: metadata.name, metadata.namespace)")
	}
	return pod, nil
}

// NewPodLabel returns a PodLabel for pod, and takes the label off the Pod
// at once, with ctx: a process that starts is not leading yet, and a
// container restarted in its Pod must not keep the label its last run
// left.
func NewPodLabel(ctx context.Context, pods Pods, pod types.NamespacedName, log *slog.Logger) (*PodLabel, error) {
	p := &PodLabel{pods: pods, pod: pod, log: log}
	if err := p.set(ctx, false); err != nil {
		return nil, err
	}
	return p, nil
}

// Elected starts labelling the Pod for a term whose context is ctx, on a
// goroutine of its own that retries until the term ends.
func (p *PodLabel) Elected(ctx context.Context) {
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	p.mu.Lock()
	p.stop, p.done = cancel, done
	p.mu.Unlock()
	go func() {
		defer close(done)
		p.retry(lctx, true)
	}()
}

// Demoted stops the labelling of the term that ended and takes the label
// off, for at most unlabelWait.
func (p *PodLabel) Demoted() {
	p.mu.Lock()
	stop, done := p.stop, p.done
	p.stop, p.done = nil, nil
	p.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	ctx, cancel := context.WithTimeout(context.Background(), unlabelWait)
	p.retry(ctx, false)
	cancel()
}

// retry sets or clears the label until that is done or ctx ends.
func (p *PodLabel) retry(ctx context.Context, on bool) {
	wait := 50 * time.Millisecond
	for {
		err := p.set(ctx, on)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			if p.log != nil && (!on || !errors.Is(ctx.Err(), context.Canceled)) {
				p.log.Warn("leader label not "+map[bool]string{true: "set", false: "taken off"}[on], "pod", p.pod.String(), "label", LeaderLabel, "err", err)
			}
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// set puts the label on the Pod, or takes it off and reads the Pod back
// until it shows it off: an abandoned request to set it may still be
// applied after the one that takes it off.
func (p *PodLabel) set(ctx context.Context, on bool) error {
	patch := []byte(`{"metadata":{"labels":{"` + LeaderLabel + `":null}}}`)
	if on {
		patch = []byte(`{"metadata":{"labels":{"` + LeaderLabel + `":"true"}}}`)
	}
	if err := p.pods.Patch(ctx, p.pod, patch); err != nil {
		return p.failed(err)
	}
	if on {
		return nil
	}
	labels, err := p.pods.Labels(ctx, p.pod)
	if err != nil {
		return p.failed(err)
	}
	if _, ok := labels[LeaderLabel]; ok {
		return fmt.Errorf("pod %s: the label %s came back", p.pod, LeaderLabel)
	}
	return nil
}

func (p *PodLabel) failed(err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("pod %s: %w; grant the ServiceAccount get and patch on pods in namespace %q", p.pod, err, p.pod.Namespace)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("pod %s: %w; POD_NAME and POD_NAMESPACE must name this Pod", p.pod, err)
	}
	return fmt.Errorf("pod %s: %w", p.pod, err)
}
