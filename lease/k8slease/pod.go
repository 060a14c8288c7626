package k8slease

import (
	"context"
	"errors"
	"log/slog"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/kube"
)

// LeaderLabel is the label PodLabel puts on the leader's Pod, with the
// value "true": a Service whose selector adds it sends traffic to the
// leader only.
const LeaderLabel = kube.LeaderLabel

// PodLabel keeps LeaderLabel on a Pod while the process in it leads: set
// when a term begins, taken off when it ends. Make one with NewPodLabel
// and wrap the Config's OnElected and OnDemoted with Wrap.
//
// A label lags the term it shows. It is set a round trip after the term
// begins, taken off a round trip after the term ends, and stays on a Pod
// whose process was killed or cut off from the API server (a killed
// process's Pod is not Ready, so a Service stops sending to it; a paused
// or partitioned one may keep it beside the new leader's). Clients routed
// by it must still send the term's fencing token, and the resource reject
// a stale one (see the fencing package): the label steers traffic, the
// token decides.
type PodLabel struct{ p *kube.PodLabel }

// PodFromEnv returns the Pod named by POD_NAMESPACE and POD_NAME, as the
// Downward API sets them:
//
//	env:
//	- name: POD_NAME
//	  valueFrom: {fieldRef: {fieldPath: metadata.name}}
//	- name: POD_NAMESPACE
//	  valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
func PodFromEnv() (types.NamespacedName, error) { return kube.PodFromEnv() }

// NewPodLabel returns a PodLabel for pod, reached through pods (a
// Clientset's CoreV1()); log, if not nil, hears of labels that could not be
// set or taken off. It takes the label off the Pod at once, with ctx: a
// process that starts is not leading yet, and a container restarted in its
// Pod must not keep the label its last run left. So a Role without patch
// on pods fails here, at the start. The Role needs get and patch on pods.
func NewPodLabel(ctx context.Context, pods corev1client.PodsGetter, pod types.NamespacedName, log *slog.Logger) (*PodLabel, error) {
	if pods == nil {
		return nil, errors.New("k8slease: nil pods client: pass kubernetes.Interface.CoreV1()")
	}
	p, err := kube.NewPodLabel(ctx, typedPods{pods.Pods(pod.Namespace)}, pod, log)
	if err != nil {
		return nil, err
	}
	return &PodLabel{p}, nil
}

// Wrap returns onElected and onDemoted (tenure.Callbacks' OnElected and
// OnDemoted; nil for none) with the labelling around them: OnElected
// starts labelling the Pod (on a goroutine of its own, retrying until the
// term ends, so that onElected starts at once), and OnDemoted stops it and
// takes the label off (for at most 5 s) before it calls onDemoted:
//
//	cfg.Callbacks.OnElected, cfg.Callbacks.OnDemoted = label.Wrap(cfg.Callbacks.OnElected, cfg.Callbacks.OnDemoted)
func (p *PodLabel) Wrap(onElected func(context.Context, election.Term), onDemoted func(election.Term, election.Reason)) (func(context.Context, election.Term), func(election.Term, election.Reason)) {
	return func(ctx context.Context, term election.Term) {
			p.p.Elected(ctx)
			if onElected != nil {
				onElected(ctx, term)
			}
		}, func(term election.Term, reason election.Reason) {
			p.p.Demoted()
			if onDemoted != nil {
				onDemoted(term, reason)
			}
		}
}

// RESTConfig returns the configuration of a client of the API server: in a
// Pod, with neither kubeconfig nor kubecontext given, its ServiceAccount's
// (rest.InClusterConfig); otherwise a kubeconfig as kubectl reads it (the
// file kubeconfig, else $KUBECONFIG, else ~/.kube/config) at its current
// context or kubecontext.
func RESTConfig(kubeconfig, kubecontext string) (*rest.Config, error) {
	return kube.RESTConfig(kubeconfig, kubecontext)
}

// typedPods is kube.Pods on a typed client.
type typedPods struct{ pods corev1client.PodInterface }

func (t typedPods) Patch(ctx context.Context, pod types.NamespacedName, patch []byte) error {
	_, err := t.pods.Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

func (t typedPods) Labels(ctx context.Context, pod types.NamespacedName) (map[string]string, error) {
	p, err := t.pods.Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return p.Labels, nil
}
