package k8slease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tenure-go/tenure"
)

// LeaderLabel is the label PodLabel puts on the leader's Pod, with the
// value "true": a Service whose selector adds it sends traffic to the
// leader only.
const LeaderLabel = "tenure.dev/leader"

// unlabelWait bounds taking the label off when a term ends: the next
// campaign waits for it (callbacks return before a new term).
const unlabelWait = 5 * time.Second

// PodLabel keeps LeaderLabel on a Pod while the process in it leads: set
// when a term begins, taken off when it ends. Make one with NewPodLabel and
// put its Callbacks in the Config.
//
// A label lags the term it shows. It is set a round trip after the term
// begins, taken off a round trip after the term ends, and stays on a Pod
// whose process was killed or cut off from the API server (a killed
// process's Pod is not Ready, so a Service stops sending to it; a paused
// or partitioned one may keep it beside the new leader's). Clients routed
// by it must still send the term's fencing token, and the resource reject
// a stale one (see the fencing package): the label steers traffic, the
// token decides.
type PodLabel struct {
	pods corev1client.PodInterface
	pod  types.NamespacedName
	log  *slog.Logger

	mu   sync.Mutex
	stop context.CancelFunc // ends the labelling of the current term
	done chan struct{}      // closed when it has ended
}

// PodFromEnv returns the Pod named by POD_NAMESPACE and POD_NAME, as the
// Downward API sets them:
//
//	env:
//	- name: POD_NAME
//	  valueFrom: {fieldRef: {fieldPath: metadata.name}}
//	- name: POD_NAMESPACE
//	  valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
func PodFromEnv() (types.NamespacedName, error) {
	pod := types.NamespacedName{Namespace: os.Getenv("POD_NAMESPACE"), Name: os.Getenv("POD_NAME")}
	if pod.Namespace == "" || pod.Name == "" {
		return pod, errors.New("POD_NAME and POD_NAMESPACE must name this Pod: set them from the Downward API (valueFrom: fieldRef: fieldPath: metadata.name, metadata.namespace)")
	}
	return pod, nil
}

// NewPodLabel returns a PodLabel for pod, reached through pods (usually
// kubernetes.NewForConfig(...).CoreV1()); log, if not nil, hears of labels
// that could not be set or taken off. It takes the label off the Pod at
// once, with ctx: a process that starts is not leading yet, and a
// container restarted in its Pod must not keep the label its last run
// left. So a Role without patch on pods fails here, at the start. The
// Role needs get and patch on pods.
func NewPodLabel(ctx context.Context, pods corev1client.PodsGetter, pod types.NamespacedName, log *slog.Logger) (*PodLabel, error) {
	if pods == nil {
		return nil, errors.New("k8slease: nil pods client: pass kubernetes.Interface.CoreV1()")
	}
	p := &PodLabel{pods: pods.Pods(pod.Namespace), pod: pod, log: log}
	if err := p.set(ctx, false); err != nil {
		return nil, err
	}
	return p, nil
}

// Callbacks returns cb with the labelling around it: OnElected starts
// labelling the Pod (on a goroutine of its own, retrying until the term
// ends, so that cb.OnElected starts at once), and OnDemoted stops it and
// takes the label off (for at most 5 s) before it calls cb.OnDemoted.
func (p *PodLabel) Callbacks(cb tenure.Callbacks) tenure.Callbacks {
	wrapped := cb
	wrapped.OnElected = func(ctx context.Context, term tenure.Term) {
		lctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		p.mu.Lock()
		p.stop, p.done = cancel, done
		p.mu.Unlock()
		go func() {
			defer close(done)
			p.retry(lctx, true)
		}()
		if cb.OnElected != nil {
			cb.OnElected(ctx, term)
		}
	}
	wrapped.OnDemoted = func(term tenure.Term, reason tenure.DemotionReason) {
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
		if cb.OnDemoted != nil {
			cb.OnDemoted(term, reason)
		}
	}
	return wrapped
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
	if _, err := p.pods.Patch(ctx, p.pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return p.failed(err)
	}
	if on {
		return nil
	}
	got, err := p.pods.Get(ctx, p.pod.Name, metav1.GetOptions{})
	if err != nil {
		return p.failed(err)
	}
	if _, ok := got.Labels[LeaderLabel]; ok {
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

// RESTConfig returns the configuration of a client of the API server: in a
// Pod, with neither kubeconfig nor kubecontext given, its ServiceAccount's
// (rest.InClusterConfig); otherwise a kubeconfig as kubectl reads it (the
// file kubeconfig, else $KUBECONFIG, else ~/.kube/config) at its current
// context or kubecontext.
func RESTConfig(kubeconfig, kubecontext string) (*rest.Config, error) {
	if kubeconfig == "" && kubecontext == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration: %w (is a ServiceAccount token mounted? automountServiceAccountToken must not be false)", err)
		}
		return cfg, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules() // $KUBECONFIG, then ~/.kube/config
	if kubeconfig != "" {
		if _, err := os.Stat(kubeconfig); err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubecontext}).ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, errors.New("no Kubernetes configuration: not in a Pod (KUBERNETES_SERVICE_HOST is unset), and no kubeconfig: add kubeconfig=PATH, or set KUBECONFIG")
		}
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}
