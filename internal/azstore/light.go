package azstore

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"
)

// Light is a Container made of the official block blob clients, one per
// blob, and two calls of the blob service's REST API made here: List
// Blobs and Create Container. Those two are the container package's,
// which links Apache Arrow in; they are one request each, authorized by
// the same credential (a bearer token) or, with a shared key, by a SAS
// signed with it for the one call.
type Light struct {
	url, name string // the container's URL and name
	key       *blob.SharedKeyCredential
	cred      azcore.TokenCredential
	opts      azcore.ClientOptions
	pl        runtime.Pipeline // for the two REST calls

	mu    sync.Mutex
	blobs map[string]*blockblob.Client // by blob name; cleared past maxBlobClients
}

// maxBlobClients bounds the block blob clients a Light keeps.
const maxBlobClients = 4096

// storageScope is the scope of a bearer token for Azure Storage.
const storageScope = "https://storage.azure.com/.default"

// NewLight returns a Light for the container at containerURL, authorized
// by key (an account's shared key) or, if key is nil, by cred. opts are
// the clients' (retries off, for tenure: see lease/azbloblease).
func NewLight(containerURL string, key *blob.SharedKeyCredential, cred azcore.TokenCredential, opts azcore.ClientOptions) (*Light, error) {
	u, err := url.Parse(containerURL)
	if err != nil {
		return nil, err
	}
	name := u.Path[strings.LastIndex(u.Path, "/")+1:]
	if name == "" {
		return nil, fmt.Errorf("container URL %q names no container", containerURL)
	}
	l := &Light{url: strings.TrimSuffix(containerURL, "/"), name: name, key: key, cred: cred, opts: opts, blobs: map[string]*blockblob.Client{}}
	var plOpts runtime.PipelineOptions
	if key == nil {
		plOpts.PerRetry = []policy.Policy{runtime.NewBearerTokenPolicy(cred, []string{storageScope}, nil)}
	}
	l.pl = runtime.NewPipeline("tenure-azstore", "v1", plOpts, &l.opts)
	return l, nil
}

// URL returns the container's URL.
func (l *Light) URL() string { return l.url }

// NewBlockBlobClient returns the block blob client of the blob named
// name, made once: as the container client makes it, the name escaped
// onto its URL.
func (l *Light) NewBlockBlobClient(name string) *blockblob.Client {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.blobs[name]; c != nil {
		return c
	}
	if len(l.blobs) >= maxBlobClients {
		clear(l.blobs)
	}
	u := runtime.JoinPaths(l.url, url.PathEscape(name))
	opts := &blockblob.ClientOptions{ClientOptions: l.opts}
	var c *blockblob.Client
	var err error
	if l.key != nil {
		c, err = blockblob.NewClientWithSharedKeyCredential(u, l.key, opts)
	} else {
		c, err = blockblob.NewClient(u, l.cred, opts)
	}
	if err != nil {
		// Only a URL that does not parse fails, and NewLight parsed it.
		c, _ = blockblob.NewClientWithNoCredential(u, opts)
	}
	l.blobs[name] = c
	return c
}

// listPage is a page of List Blobs, as the service writes it.
type listPage struct {
	Blobs []struct {
		Name struct {
			Encoded bool   `xml:"Encoded,attr"`
			Value   string `xml:",chardata"`
		} `xml:"Name"`
	} `xml:"Blobs>Blob"`
	NextMarker string `xml:"NextMarker"`
}

// ListBlobs calls fn with the name of every blob under prefix: List
// Blobs, a page at a time.
func (l *Light) ListBlobs(ctx context.Context, prefix string, fn func(name string) error) error {
	marker := ""
	for {
		q := url.Values{"restype": {"container"}, "comp": {"list"}, "prefix": {prefix}}
		if marker != "" {
			q.Set("marker", marker)
		}
		resp, err := l.do(ctx, http.MethodGet, q, (&sas.ContainerPermissions{List: true}).String(), "")
		if err != nil {
			return err
		}
		var page listPage
		err = xml.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("list blobs: %w", err)
		}
		for _, b := range page.Blobs {
			name := b.Name.Value
			if b.Name.Encoded {
				if name, err = url.QueryUnescape(name); err != nil {
					continue // not a name a lease has
				}
			}
			if err := fn(name); err != nil {
				return err
			}
		}
		if page.NextMarker == "" {
			return nil
		}
		marker = page.NextMarker
	}
}

// Create creates the container: Create Container. A container that exists
// already is an error with the code ContainerAlreadyExists.
func (l *Light) Create(ctx context.Context) error {
	resp, err := l.do(ctx, http.MethodPut, url.Values{"restype": {"container"}}, "", (&sas.AccountResourceTypes{Container: true}).String())
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// do sends one request to the container's URL with query q. With a shared
// key it is authorized by a SAS for this call: a container's, with
// permissions perms, or, with resources, an account's (Create Container
// takes no container SAS).
func (l *Light) do(ctx context.Context, method string, q url.Values, perms, resources string) (*http.Response, error) {
	u := l.url + "?" + q.Encode()
	if l.key != nil {
		var qp sas.QueryParameters
		var err error
		expiry := time.Now().UTC().Add(time.Hour)
		if resources != "" {
			qp, err = sas.AccountSignatureValues{Protocol: sas.ProtocolHTTPSandHTTP, ExpiryTime: expiry,
				Permissions: (&sas.AccountPermissions{Create: true}).String(), ResourceTypes: resources}.SignWithSharedKey(l.key)
		} else {
			qp, err = sas.BlobSignatureValues{Protocol: sas.ProtocolHTTPSandHTTP, ExpiryTime: expiry,
				Permissions: perms, ContainerName: l.name}.SignWithSharedKey(l.key)
		}
		if err != nil {
			return nil, err
		}
		u += "&" + qp.Encode()
	}
	req, err := runtime.NewRequest(ctx, method, u)
	if err != nil {
		return nil, err
	}
	req.Raw().Header.Set("x-ms-version", sas.Version)
	resp, err := l.pl.Do(req)
	if err != nil {
		return nil, err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK, http.StatusCreated) {
		return nil, runtime.NewResponseError(resp)
	}
	return resp, nil
}
