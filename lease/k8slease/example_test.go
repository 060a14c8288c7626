package k8slease_test

import (
	"log"

	"k8s.io/client-go/kubernetes"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/lease/k8slease"
)

// A Store on the Leases of the namespace "jobs", for a Candidate. In a Pod
// the config is its ServiceAccount's; elsewhere a kubeconfig, found as
// kubectl finds it. It needs a cluster, so it is compiled but not run.
func Example() {
	cfg, err := k8slease.RESTConfig("", "")
	if err != nil {
		log.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}
	store, err := k8slease.New(cs.CoordinationV1(), k8slease.Config{Namespace: "jobs"})
	if err != nil {
		log.Fatal(err)
	}
	c, err := tenure.New(tenure.Config{Lease: "nightly-report", Store: store})
	if err != nil {
		log.Fatal(err)
	}
	_ = c // c.Run(ctx)
}
