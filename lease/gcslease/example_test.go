package gcslease_test

import (
	"context"
	"log"

	"google.golang.org/api/storage/v1"

	"github.com/tenure-go/tenure/lease/gcslease"
)

// A Store on the objects under tenure/ in a bucket, through the JSON
// API's client with Application Default Credentials. It needs a bucket, so
// it is compiled but not run.
func Example() {
	svc, err := storage.NewService(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store, err := gcslease.New(svc, gcslease.Config{Bucket: "acme-leases", Prefix: "tenure/"})
	if err != nil {
		log.Fatal(err)
	}
	_ = store // hand it to a tenure.Candidate
}
