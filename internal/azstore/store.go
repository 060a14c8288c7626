// Package azstore is tenure's store on Azure Blob Storage, the code of
// lease/azbloblease, over a narrow Container interface: the official
// *container.Client satisfies it through azbloblease, and so does this
// package's Light container, on the blob and block blob clients alone,
// which the tenure command uses. The container package links Apache
// Arrow in (for listings in Arrow's format): 9 MB of the binary, for
// nothing a lease needs.
//
// The package doc of lease/azbloblease says what the store does and
// guarantees; this package holds how.
package azstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

	"github.com/tenure-go/tenure/internal/recordjson"
	"github.com/tenure-go/tenure/lease"
)

// Container is what a Store asks of a container: a block blob client for
// each blob, a listing of blob names, and its URL for messages.
type Container interface {
	URL() string
	NewBlockBlobClient(name string) *blockblob.Client
	// ListBlobs calls fn with the name of every blob under prefix.
	ListBlobs(ctx context.Context, prefix string, fn func(name string) error) error
}

// Store is a lease.Store on an Azure Blob container. It is safe for
// concurrent use. Make one with New.
type Store struct {
	cc     Container
	prefix string
}

var (
	_ lease.Store   = (*Store)(nil)
	_ lease.Lister  = (*Store)(nil)
	_ lease.Deleter = (*Store)(nil)
)

// maxBlobName is the longest blob name Azure takes, in characters.
const maxBlobName = 1024

// New returns a Store on the container cc, its blob names under prefix.
// It sends nothing: a missing container shows at the first call, as a
// permanent error.
func New(cc Container, prefix string) (*Store, error) {
	if len(prefix)+3*lease.MaxNameLen > maxBlobName {
		return nil, fmt.Errorf("azbloblease: Config.Prefix is %d bytes, limit %d", len(prefix), maxBlobName-3*lease.MaxNameLen)
	}
	return &Store{cc: cc, prefix: prefix}, nil
}

// Blob returns the blob name of the lease name: the prefix and the name,
// with each "." that ends a segment written "%2E". Azure's naming rules say
// to avoid blob names whose segments end with a dot ("Naming and
// Referencing Containers, Blobs, and Metadata"): URL handling may drop it,
// making "a./b" and "a/b" one blob. A lease name holds no '%', so the
// mapping stays one-to-one. (Azurite keeps the dot either way.)
func (s *Store) Blob(name string) string {
	segs := strings.Split(name, "/")
	for i, seg := range segs {
		if strings.HasSuffix(seg, ".") {
			segs[i] = seg[:len(seg)-1] + "%2E"
		}
	}
	return s.prefix + strings.Join(segs, "/")
}

func (s *Store) nameOf(blob string) (string, bool) {
	rest, ok := strings.CutPrefix(blob, s.prefix)
	if !ok {
		return "", false
	}
	name := strings.ReplaceAll(rest, "%2E", ".")
	return name, lease.ValidateName(name) == nil && s.Blob(name) == blob
}

// Get implements lease.Store with one Get Blob.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if err := lease.CheckGet(ctx, name); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	resp, err := s.cc.NewBlockBlobClient(s.Blob(name)).DownloadStream(ctx, nil)
	if bloberror.HasCode(err, bloberror.BlobNotFound) {
		return lease.Record{}, lease.NoVersion, lease.NotFound(name)
	}
	if err != nil {
		return lease.Record{}, lease.NoVersion, s.failed(ctx, "get", name, err)
	}
	defer resp.Body.Close()
	if n := resp.ContentLength; n != nil && *n > recordjson.MaxSize {
		return lease.Record{}, lease.NoVersion, &lease.RecordError{Name: name, Field: "body",
			Reason: fmt.Sprintf("blob is %d bytes, limit %d: not a lease record (not read)", *n, recordjson.MaxSize)}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, recordjson.MaxSize+1))
	if err != nil {
		return lease.Record{}, lease.NoVersion, s.failed(ctx, "get", name, err)
	}
	if resp.ETag == nil || *resp.ETag == "" {
		return lease.Record{}, lease.NoVersion, fmt.Errorf("get lease %q: the service sent no ETag, which is the lease version", name)
	}
	rec, err := recordjson.Decode(name, data)
	if err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	return rec, lease.Version(*resp.ETag), nil
}

// Put implements lease.Store with one Put Blob under If-None-Match or
// If-Match.
func (s *Store) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if err := lease.CheckPut(ctx, name, rec); err != nil {
		return lease.NoVersion, err
	}
	cond := &blob.ModifiedAccessConditions{}
	switch {
	case expect == lease.NoVersion:
		cond.IfNoneMatch = ptr(azcore.ETagAny)
	case expect == lease.AnyVersion || strings.TrimSpace(string(expect)) == "*":
		return lease.NoVersion, lease.Conflict(name) // If-Match: * would overwrite any blob
	default:
		cond.IfMatch = ptr(azcore.ETag(expect))
	}
	body := recordjson.Encode(rec, "")
	resp, err := s.cc.NewBlockBlobClient(s.Blob(name)).Upload(ctx, streaming.NopCloser(bytes.NewReader(body)), &blockblob.UploadOptions{
		HTTPHeaders:      &blob.HTTPHeaders{BlobContentType: ptr("application/json"), BlobCacheControl: ptr("no-store")},
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: cond},
	})
	if bloberror.HasCode(err, bloberror.ConditionNotMet, bloberror.BlobAlreadyExists) {
		return lease.NoVersion, lease.Conflict(name)
	}
	if err != nil {
		return lease.NoVersion, s.failed(ctx, "put", name, err)
	}
	if resp.ETag == nil || *resp.ETag == "" {
		return lease.NoVersion, fmt.Errorf("put lease %q: the service sent no ETag, which is the lease version", name)
	}
	return lease.Version(*resp.ETag), nil
}

func ptr[T any](v T) *T { return &v }

// shortError is a service error on one line: azcore's own runs to a dozen,
// with the response body, too much for a log line that repeats.
type shortError struct {
	err error
	re  *azcore.ResponseError
}

func (e shortError) Error() string {
	return fmt.Sprintf("%d %s", e.re.StatusCode, e.re.ErrorCode)
}

func (e shortError) Unwrap() error { return e.err }

// failed wraps a failed call's error: the context's error when ctx ended,
// and permanent when retrying cannot cure it.
func (s *Store) failed(ctx context.Context, op, name string, err error) error {
	err = lease.CallError(ctx, err)
	var re *azcore.ResponseError
	status := 0
	if errors.As(err, &re) {
		status = re.StatusCode
		err = shortError{err, re}
	}
	e := fmt.Errorf("%s lease %q (blob %s in %s): %w", op, name, s.Blob(name), s.cc.URL(), err)
	switch {
	case bloberror.HasCode(err, bloberror.ContainerNotFound):
		return lease.Permanent(fmt.Errorf("%w; the container does not exist: create it (az storage container create), or add create=true to the URL", e))
	case bloberror.HasCode(err, bloberror.AuthenticationFailed, bloberror.InvalidAuthenticationInfo, bloberror.NoAuthenticationInformation,
		bloberror.AuthorizationFailure, bloberror.AuthorizationPermissionMismatch, bloberror.InsufficientAccountPermissions),
		status == http.StatusUnauthorized, status == http.StatusForbidden:
		// The service answers a wrong key and missing rights alike, 403.
		return lease.Permanent(fmt.Errorf("%w; check the credentials (AZURE_STORAGE_KEY, or the identity DefaultAzureCredential finds) and that they may read and write the container's blobs (Storage Blob Data Contributor)", e))
	case status == http.StatusBadRequest:
		return lease.Permanent(e)
	}
	return e
}

// List implements lease.Lister with flat blob listings under the prefix.
func (s *Store) List(ctx context.Context, prefix string, fn func(name string) error) error {
	var stop error // fn's, to return as it is
	err := s.cc.ListBlobs(ctx, s.prefix+prefix, func(blob string) error {
		name, ok := s.nameOf(blob)
		if !ok || !strings.HasPrefix(name, prefix) {
			return nil // not a lease's blob
		}
		if err := fn(name); err != nil {
			stop = err
			return err
		}
		return nil
	})
	switch {
	case err == nil:
		return nil
	case stop != nil && errors.Is(err, stop):
		return err
	}
	return s.failed(ctx, "list", prefix+"*", err)
}

// Delete implements lease.Deleter with one Delete Blob under If-Match
// (none with lease.AnyVersion).
func (s *Store) Delete(ctx context.Context, name string, expect lease.Version) error {
	if err := lease.CheckDelete(ctx, name); err != nil {
		return err
	}
	opts := &blob.DeleteOptions{}
	if expect != lease.AnyVersion {
		if expect == lease.NoVersion || strings.TrimSpace(string(expect)) == "*" {
			return lease.Conflict(name)
		}
		opts.AccessConditions = &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: ptr(azcore.ETag(expect))}}
	}
	_, err := s.cc.NewBlockBlobClient(s.Blob(name)).Delete(ctx, opts)
	switch {
	case err == nil:
		return nil
	case bloberror.HasCode(err, bloberror.BlobNotFound):
		return lease.NotFound(name)
	case bloberror.HasCode(err, bloberror.ConditionNotMet):
		return lease.Conflict(name)
	}
	return s.failed(ctx, "delete", name, err)
}
