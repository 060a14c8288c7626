// Package azbloblease is a lease.Store on Azure Blob Storage, through the
// official client, github.com/Azure/azure-sdk-for-go/sdk/storage/azblob: a
// block blob per lease, each write one upload with an ETag condition (the
// package example makes one).
//
// The client is a tree of handles, not an interface, so New takes the
// *container.Client itself; it calls NewBlockBlobClient(…).Upload,
// DownloadStream and, for operators' tools only, NewListBlobsFlatPager and
// Delete. (The tenure command reaches the same calls without the container
// package, which links Apache Arrow in.)
//
// # The conditional primitive
//
// A lease is the blob PREFIX+name; its body is tenure's JSON record (the
// format lease/s3lease documents), and its version is the blob's ETag. Every
// write is one Put Blob with a condition:
//
//   - to create a lease, If-None-Match: * (only if no blob exists);
//   - to replace one, If-Match: ETAG.
//
// The blob service evaluates the condition and writes as one step: of any
// number of writers that read the same ETag, one succeeds and the others get
// 412 ConditionNotMet (409 BlobAlreadyExists on a create), a conflict. Every
// write gives the blob a new ETag, a re-created blob too.
//
// Not Azure's own blob leases: an Azure lease is a lock on the blob, 15 to
// 60 seconds or infinite, renewed by its holder, with no fencing token, and
// timed by the service, not by the rules tenure uses on every store. A
// tenure record on a plain blob keeps the expiry rules, the tokens and the
// lost-record rule the same everywhere. Releasing is a conditional
// overwrite (a record with Released set); the protocol never deletes.
//
// The client's own retries are off for writes: it would send a conditional
// write again after a lost response, and the second send would fail its
// condition against the first: a false conflict, where the lease.Store
// contract wants an error that makes the caller read back and compare its
// nonce. Make the container client with Retry.MaxRetries = -1 (storeurl
// does), or accept that a lost response may read as a conflict (safe: the
// caller reads the record and finds its own nonce).
//
// # Linearizability
//
// Blob storage is strongly consistent: a write is durable and visible to
// every reader once the service acknowledges it ("Azure Storage was designed
// to embrace a strong consistency model that guarantees that after the
// service performs an insert or update operation, subsequent read
// operations return the latest update": "Managing concurrency in Blob
// storage", learn.microsoft.com/azure/storage/blobs/concurrency-manage).
// Read from the primary endpoint: the -secondary endpoint of an RA-GRS
// account is eventually consistent.
//
// # Permissions
//
// A candidate needs to read and write blobs in the container: the role
// Storage Blob Data Contributor, or a SAS with read, create and write.
// tenure list needs list; tenure gc needs delete.
//
// # Errors
//
// A missing container, failed authentication and denied access are wrapped
// with lease.Permanent, so that tenure fails at once (the tenure command
// exits 69). Timeouts, throttling (503 ServerBusy) and 5xx are transient.
package azbloblease

import (
	"context"
	"errors"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/tenure-go/tenure/internal/azstore"
	"github.com/tenure-go/tenure/lease"
)

// Config configures a Store.
type Config struct {
	// Prefix is put in front of every lease name to make its blob name,
	// for example "tenure/". Default "".
	Prefix string
}

// Store is a lease.Store on an Azure Blob container. It is safe for
// concurrent use. Make one with New.
type Store struct{ s *azstore.Store }

var (
	_ lease.Store   = (*Store)(nil)
	_ lease.Lister  = (*Store)(nil)
	_ lease.Deleter = (*Store)(nil)
)

// New returns a Store on the container cc names. It sends nothing: a
// missing container shows at the first call, as a permanent error.
func New(cc *container.Client, cfg Config) (*Store, error) {
	if cc == nil {
		return nil, errors.New("azbloblease: nil container client")
	}
	s, err := azstore.New(containerClient{cc}, cfg.Prefix)
	if err != nil {
		return nil, err
	}
	return &Store{s}, nil
}

// Blob returns the blob name of the lease name: the prefix and the name,
// with each "." that ends a segment written "%2E". Azure's naming rules say
// to avoid blob names whose segments end with a dot ("Naming and
// Referencing Containers, Blobs, and Metadata"): URL handling may drop it,
// making "a./b" and "a/b" one blob. A lease name holds no '%', so the
// mapping stays one-to-one. (Azurite keeps the dot either way.)
func (s *Store) Blob(name string) string { return s.s.Blob(name) }

// Get implements lease.Store with one Get Blob.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	return s.s.Get(ctx, name)
}

// Put implements lease.Store with one Put Blob under If-None-Match or
// If-Match.
func (s *Store) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	return s.s.Put(ctx, name, rec, expect)
}

// List implements lease.Lister with flat blob listings under the prefix.
func (s *Store) List(ctx context.Context, prefix string, fn func(name string) error) error {
	return s.s.List(ctx, prefix, fn)
}

// Delete implements lease.Deleter with one Delete Blob under If-Match
// (none with lease.AnyVersion).
func (s *Store) Delete(ctx context.Context, name string, expect lease.Version) error {
	return s.s.Delete(ctx, name, expect)
}

// containerClient is an azstore.Container on the official client.
type containerClient struct{ *container.Client }

func (c containerClient) ListBlobs(ctx context.Context, prefix string, fn func(name string) error) error {
	p := c.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &prefix})
	for p.More() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, item := range page.Segment.BlobItems {
			if item.Name == nil {
				continue
			}
			if err := fn(*item.Name); err != nil {
				return err
			}
		}
	}
	return nil
}
