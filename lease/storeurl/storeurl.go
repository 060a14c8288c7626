// Package storeurl opens a lease.Store named by a URL, the way the tenure
// command's --store flag does, so that programs that embed tenure can take
// the same setting:
//
//	dynamodb://TABLE?region=eu-west-1                   lease/dynamolease
//	dynamodb://TABLE?endpoint=http://127.0.0.1:8000&create=true
//	s3://BUCKET/PREFIX?region=eu-west-1                 lease/s3lease
//	s3://BUCKET?endpoint=http://127.0.0.1:9000&path-style=true&create=true
//	postgres://USER@HOST:5432/DB?table=T&create=true    lease/pglease (postgresql:// too)
//	etcd://HOST:2379,HOST:2379/tenure/?tls=true         lease/etcdlease
//	gs://BUCKET/PREFIX                                  lease/gcslease
//	gs://BUCKET/PREFIX?endpoint=http://127.0.0.1:4443&create=true&project=P
//	azblob://ACCOUNT/CONTAINER/PREFIX                   lease/azbloblease
//	azblob://ACCOUNT/CONTAINER/PREFIX?endpoint=http://127.0.0.1:10000/ACCOUNT&create=true
//	k8s://NAMESPACE                                     lease/k8slease
//	k8s://NAMESPACE?kubeconfig=/home/me/.kube/config&context=prod
//	redis://USER@HOST:6379/0?prefix=tenure:              lease/redislease (rediss:// for TLS)
//	redis://HOST:26379?master_name=M                    (through Sentinel; cluster=true: Redis Cluster)
//	nats://HOST:4222/BUCKET?create=true&replicas=3      lease/natslease (tls:// for TLS)
//	file:///var/lib/tenure                              lease/filelease (shared=true: a directory
//	                                                    others may write, shared on purpose)
//	mem:NAME                                            lease/memlease (one per NAME in the process)
//
// Query parameters for dynamodb and s3:
//
//	region      the AWS region; default: the SDK's default chain (AWS_REGION,
//	            the profile). One of the two must name it: replicas that
//	            fell back to different regions would use different tables
//	            and each lead
//	profile     a shared-config profile (~/.aws/config); default: the SDK's
//	endpoint    a compatible server (DynamoDB Local, MinIO, versitygw...), as
//	            http://HOST:PORT or https://HOST:PORT; for
//	            DynamoDB it also turns off the response checksum check,
//	            which DynamoDB Local's error responses fail
//	create      true: create the table (on-demand) or the bucket if missing
//	key         dynamodb: the table's partition key attribute (default "lease")
//	path-style  s3: true for path-style addressing (default: true with an
//	            endpoint, false without)
//
// postgres: every parameter but table (default tenure_leases) and create
// (CREATE TABLE IF NOT EXISTS) is the pgx driver's, libpq's names
// (sslmode, connect_timeout...); the password comes from the URL or from
// where libpq looks (PGPASSWORD, ~/.pgpass).
//
// etcd: the user from the URL, the password from the URL or from
// TENURE_ETCD_PASSWORD; tls=true for TLS, ca=FILE for a CA bundle,
// cert=FILE and key=FILE for a client certificate. The path is the key
// prefix, leading slash included. The client connects at the first call,
// so that a cluster down when tenure starts is retried like any outage.
//
// gs: Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, the
// metadata server, gcloud auth application-default login); none with an
// http:// endpoint (an emulator). create=true needs project=ID (or
// GOOGLE_CLOUD_PROJECT).
//
// azblob: the account key from AZURE_STORAGE_KEY if set, else the identity
// DefaultAzureCredential finds (environment, workload or managed identity,
// az login). endpoint is the account's URL (default
// https://ACCOUNT.blob.core.windows.net).
//
// k8s: in a Pod, its ServiceAccount (rest.InClusterConfig); elsewhere, or
// with kubeconfig=PATH or context=NAME, a kubeconfig as kubectl reads it
// (kubeconfig=PATH, else $KUBECONFIG, else ~/.kube/config) at its current
// context or the one named. The ServiceAccount needs a Role with get,
// list, watch, create and update on leases in the namespace (see
// lease/k8slease). client-go's client-side rate limit is off: the API
// server's priority and fairness protects it, and a renewal held back
// client-side would only miss its deadline unseen.
//
// redis and rediss: the user and password from the URL, the password also
// from TENURE_REDIS_PASSWORD; /DB selects a database; prefix=P sets the
// key prefix (default "tenure:"); master_name=M follows a Sentinel's
// primary; cluster=true speaks to a Redis Cluster; every other parameter
// is go-redis's (dial_timeout, read_timeout, pool_size, addr...).
//
// nats and tls: the user and password from the URL, the password also
// from TENURE_NATS_PASSWORD, or creds=FILE; the path is the key-value
// bucket; create=true creates it (replicas=N, default 1). The client
// connects in the background and the bucket is bound at the first call.
//
// The SDK's own retries are off in the clients Open makes: tenure retries a
// failed call itself, with backoff bounded by the lease's timings, and an
// SDK retrying within one call hides why it fails (connection refused)
// behind a timeout.
//
// Credentials come from the SDK's default chain (config.LoadDefaultConfig):
// the environment, the shared files and profiles, SSO, web identity, the
// instance or task role. A local server still wants some: any non-empty
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY do. An unknown parameter is an
// error, so that a typo never silently falls back to a default.
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/dynamolease"
	"github.com/tenure-go/tenure/lease/filelease"
	"github.com/tenure-go/tenure/lease/memlease"
	"github.com/tenure-go/tenure/lease/s3lease"
)

// Open returns the store raw names. Creating a table or bucket (create=true)
// may take up to a few minutes, bounded by ctx; otherwise Open sends no
// request: a wrong table or bucket shows at the first lease call, as a
// permanent error.
func Open(ctx context.Context, raw string) (lease.Store, error) {
	s, err := open(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("store %q: %w", Redact(raw), err)
	}
	return s, nil
}

// Redact returns raw with the password in it, if any, replaced by "xxxxx",
// for logs and messages.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); !ok {
		return raw
	}
	return u.Redacted()
}

func open(ctx context.Context, raw string) (lease.Store, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	switch u.Scheme {
	case "mem":
		if err := only(q); err != nil {
			return nil, err
		}
		return memStore(u.Opaque + u.Host + u.Path), nil
	case "file":
		if err := only(q, "shared"); err != nil {
			return nil, err
		}
		shared, err := boolParam(q, "shared", false)
		if err != nil {
			return nil, err
		}
		dir := u.Path
		if u.Opaque != "" { // file:relative/dir
			dir = u.Opaque
		}
		if u.Host != "" && u.Host != "localhost" {
			return nil, errors.New("a file store is on this host: write file:///DIR (three slashes)")
		}
		if dir == "" {
			return nil, errors.New("no directory: write file:///DIR")
		}
		if shared {
			return filelease.NewShared(filepath.FromSlash(dir))
		}
		return filelease.New(filepath.FromSlash(dir))
	case "dynamodb":
		return openDynamo(ctx, u, q)
	case "s3":
		return openS3(ctx, u, q)
	case "postgres", "postgresql":
		return openPostgres(ctx, u, q)
	case "etcd":
		return openEtcd(u, q)
	case "gs":
		return openGCS(ctx, u, q)
	case "azblob":
		return openAzblob(ctx, u, q)
	case "k8s":
		return openK8s(u, q)
	case "redis", "rediss":
		return openRedis(u, q)
	case "nats", "tls":
		return openNATS(u, q)
	case "":
		return nil, errors.New("no scheme: want dynamodb://TABLE, s3://BUCKET/PREFIX, postgres://HOST/DB, etcd://HOST:PORT/PREFIX, gs://BUCKET/PREFIX, azblob://ACCOUNT/CONTAINER/PREFIX, k8s://NAMESPACE, redis://HOST:PORT, nats://HOST:PORT/BUCKET, file:///DIR or mem:NAME")
	}
	return nil, fmt.Errorf("unknown scheme %q: want dynamodb, s3, postgres, etcd, gs, azblob, k8s, redis, nats, file or mem", u.Scheme)
}

var (
	memMu     sync.Mutex
	memStores = map[string]*memlease.Store{}
)

func memStore(name string) *memlease.Store {
	memMu.Lock()
	defer memMu.Unlock()
	s := memStores[name]
	if s == nil {
		s = memlease.New()
		memStores[name] = s
	}
	return s
}

// only reports the first parameter of q not in allowed.
func only(q url.Values, allowed ...string) error {
	for k := range q {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			if len(allowed) == 0 {
				return fmt.Errorf("unknown parameter %q: this store takes none", k)
			}
			return fmt.Errorf("unknown parameter %q: want one of %s", k, strings.Join(allowed, ", "))
		}
	}
	return nil
}

func boolParam(q url.Values, name string, def bool) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: want true or false", name, v)
	}
	return b, nil
}

// awsSettings reads what the AWS stores share: the SDK's configuration
// (region and profile from q) and create.
func awsSettings(ctx context.Context, q url.Values) (aws.Config, bool, error) {
	create, err := boolParam(q, "create", false)
	if err != nil {
		return aws.Config{}, false, err
	}
	var opts []func(*config.LoadOptions) error
	if r := q.Get("region"); r != "" {
		opts = append(opts, config.WithRegion(r))
	}
	if p := q.Get("profile"); p != "" {
		opts = append(opts, config.WithSharedConfigProfile(p))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, false, fmt.Errorf("load AWS config: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, false, errors.New("no AWS region: add region=... to the URL, or set AWS_REGION (or a profile's region)")
	}
	cfg.RetryMaxAttempts = 1
	return cfg, create, nil
}

// endpoint returns the endpoint parameter, checked.
func endpoint(q url.Values) (string, error) {
	e := q.Get("endpoint")
	if e == "" {
		return "", nil
	}
	u, err := url.Parse(e)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("endpoint=%q: the endpoint needs http:// or https://, e.g. endpoint=http://127.0.0.1:8000", e)
	}
	return e, nil
}

// setupWait bounds creating a table or bucket.
const setupWait = 5 * time.Minute

func openDynamo(ctx context.Context, u *url.URL, q url.Values) (lease.Store, error) {
	if err := only(q, "region", "profile", "endpoint", "create", "key"); err != nil {
		return nil, err
	}
	table := u.Host
	if table == "" || strings.Trim(u.Path, "/") != "" {
		return nil, errors.New("want dynamodb://TABLE")
	}
	endpoint, err := endpoint(q)
	if err != nil {
		return nil, err
	}
	cfg, create, err := awsSettings(ctx, q)
	if err != nil {
		return nil, err
	}
	api := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.DisableValidateResponseChecksum = true
		}
	})
	if create {
		ctx, cancel := context.WithTimeout(ctx, setupWait)
		defer cancel()
		if err := dynamolease.CreateTable(ctx, api, table, dynamolease.TableOptions{KeyAttribute: q.Get("key")}); err != nil {
			return nil, lease.Permanent(err) // the service refused (credentials, rights) or never answered
		}
	}
	return dynamolease.New(api, dynamolease.Config{Table: table, KeyAttribute: q.Get("key")})
}

func openS3(ctx context.Context, u *url.URL, q url.Values) (lease.Store, error) {
	if err := only(q, "region", "profile", "endpoint", "create", "path-style"); err != nil {
		return nil, err
	}
	bucket, prefix := u.Host, strings.TrimPrefix(u.Path, "/")
	if bucket == "" {
		return nil, errors.New("want s3://BUCKET/PREFIX")
	}
	endpoint, err := endpoint(q)
	if err != nil {
		return nil, err
	}
	pathStyle, err := boolParam(q, "path-style", endpoint != "")
	if err != nil {
		return nil, err
	}
	cfg, create, err := awsSettings(ctx, q)
	if err != nil {
		return nil, err
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = pathStyle
		if endpoint != "" { // an S3-compatible server
			o.BaseEndpoint = aws.String(endpoint)
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
	})
	s, err := s3lease.New(client, s3lease.Config{Bucket: bucket, Prefix: prefix})
	if err != nil {
		return nil, err
	}
	if create {
		ctx, cancel := context.WithTimeout(ctx, setupWait)
		defer cancel()
		if err := createBucket(ctx, client, bucket, cfg.Region); err != nil {
			return nil, lease.Permanent(err) // the service refused (credentials, rights) or never answered
		}
	}
	return s, nil
}

func createBucket(ctx context.Context, c *s3.Client, bucket, region string) error {
	in := &s3.CreateBucketInput{Bucket: aws.String(bucket)}
	if region != "us-east-1" { // us-east-1 refuses an explicit constraint
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(region)}
	}
	_, err := c.CreateBucket(ctx, in)
	var owned *s3types.BucketAlreadyOwnedByYou
	var exists *s3types.BucketAlreadyExists
	switch {
	case err == nil, errors.As(err, &owned):
		return nil
	case errors.As(err, &exists):
		return fmt.Errorf("create bucket %q: the name is taken by another account: %w", bucket, err)
	}
	return fmt.Errorf("create bucket %q: %w", bucket, err)
}
