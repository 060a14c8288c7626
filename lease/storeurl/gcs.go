package storeurl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	"google.golang.org/api/storage/v1"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/gcslease"
)

// openGCS opens gs://BUCKET/PREFIX: Application Default Credentials, or
// none with an http:// endpoint (an emulator).
func openGCS(ctx context.Context, u *url.URL, q url.Values) (lease.Store, error) {
	if err := only(q, "endpoint", "create", "project"); err != nil {
		return nil, err
	}
	bucket, prefix := u.Host, strings.TrimPrefix(u.Path, "/")
	if bucket == "" {
		return nil, errors.New("want gs://BUCKET/PREFIX")
	}
	endpoint, err := endpoint(q)
	if err != nil {
		return nil, err
	}
	create, err := boolParam(q, "create", false)
	if err != nil {
		return nil, err
	}
	var opts []option.ClientOption
	if endpoint != "" {
		opts = append(opts, option.WithEndpoint(strings.TrimSuffix(endpoint, "/")+"/storage/v1/"))
		if strings.HasPrefix(endpoint, "http://") {
			opts = append(opts, option.WithoutAuthentication())
		}
	}
	// Its calls are sent once: tenure retries, within the lease's timings.
	svc, err := storage.NewService(ctx, opts...)
	if err != nil {
		return nil, lease.Permanent(fmt.Errorf("GCS client: %w (credentials: GOOGLE_APPLICATION_CREDENTIALS, or gcloud auth application-default login)", err))
	}
	s, err := gcslease.New(svc, gcslease.Config{Bucket: bucket, Prefix: prefix})
	if err != nil {
		return nil, err
	}
	if create {
		project := q.Get("project")
		if project == "" {
			project = os.Getenv("GOOGLE_CLOUD_PROJECT")
		}
		if project == "" {
			return nil, errors.New("create=true needs the project to create the bucket in: add project=ID, or set GOOGLE_CLOUD_PROJECT")
		}
		ctx, cancel := context.WithTimeout(ctx, setupWait)
		defer cancel()
		_, err := svc.Buckets.Insert(project, &storage.Bucket{Name: bucket}).Context(ctx).Do()
		var ge *googleapi.Error
		if err != nil && (!errors.As(err, &ge) || ge.Code != http.StatusConflict) { // 409: it exists
			return nil, fmt.Errorf("create bucket gs://%s: %w", bucket, err)
		}
	}
	return s, nil
}
