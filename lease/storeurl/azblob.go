package storeurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/tenure-go/tenure/internal/azstore"
	"github.com/tenure-go/tenure/lease"
)

// openAzblob opens azblob://ACCOUNT/CONTAINER/PREFIX: the account key from
// AZURE_STORAGE_KEY if set, else the identity DefaultAzureCredential finds
// (environment, workload or managed identity, az login).
func openAzblob(ctx context.Context, u *url.URL, q url.Values) (lease.Store, error) {
	if err := only(q, "endpoint", "create"); err != nil {
		return nil, err
	}
	account := u.Host
	cont, prefix, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if account == "" || cont == "" {
		return nil, errors.New("want azblob://ACCOUNT/CONTAINER/PREFIX")
	}
	service, err := endpoint(q)
	if err != nil {
		return nil, err
	}
	if service == "" {
		service = "https://" + account + ".blob.core.windows.net"
	}
	create, err := boolParam(q, "create", false)
	if err != nil {
		return nil, err
	}
	containerURL := strings.TrimSuffix(service, "/") + "/" + cont
	// The client's retries are off: tenure retries, within the lease's
	// timings, and a retried conditional write reads as a false conflict.
	// The light container: the official container client links Apache
	// Arrow in (lease/azbloblease.New takes one, for programs that have
	// it).
	opts := azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}
	var cc *azstore.Light
	if key := os.Getenv("AZURE_STORAGE_KEY"); key != "" {
		cred, err := blob.NewSharedKeyCredential(account, key)
		if err != nil {
			return nil, lease.Permanent(fmt.Errorf("AZURE_STORAGE_KEY: %w", err))
		}
		if cc, err = azstore.NewLight(containerURL, cred, nil, opts); err != nil {
			return nil, err
		}
	} else {
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, lease.Permanent(fmt.Errorf("no Azure credentials (set AZURE_STORAGE_KEY, or use a managed identity or az login): %w", err))
		}
		if cc, err = azstore.NewLight(containerURL, nil, cred, opts); err != nil {
			return nil, err
		}
	}
	s, err := azstore.New(cc, prefix)
	if err != nil {
		return nil, err
	}
	if create {
		ctx, cancel := context.WithTimeout(ctx, setupWait)
		defer cancel()
		if err := cc.Create(ctx); err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
			return nil, fmt.Errorf("create container %s: %w", containerURL, err)
		}
	}
	return s, nil
}
