package etcdlease_test

import (
	"log"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/lease/etcdlease"
)

// A Store on the keys under /tenure/ of an etcd cluster. It needs a
// cluster, so it is compiled but not run.
func Example() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"etcd-1:2379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	store, err := etcdlease.New(cli, etcdlease.Config{Prefix: "/tenure/"})
	if err != nil {
		log.Fatal(err)
	}
	_ = store // hand it to a tenure.Candidate
}
