package azbloblease_test

import (
	"log"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/tenure-go/tenure/lease/azbloblease"
)

// A Store on the blobs under tenure/ in a container, reached with the
// default Azure credentials. It needs an account, so it is compiled but
// not run.
func Example() {
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		log.Fatal(err)
	}
	cc, err := container.NewClient("https://acct.blob.core.windows.net/leases", cred, nil)
	if err != nil {
		log.Fatal(err)
	}
	store, err := azbloblease.New(cc, azbloblease.Config{Prefix: "tenure/"})
	if err != nil {
		log.Fatal(err)
	}
	_ = store // hand it to a tenure.Candidate
}
