// Package testservers hands tests SDK clients configured for the real servers that
// scripts/testservers.sh starts: DynamoDB Local, versitygw and MinIO; and the
// addresses of the others it starts: PostgreSQL, etcd, fake-gcs-server, Azurite,
// kube-apiserver, Redis and NATS.
//
// The script exports the servers' addresses and keys in environment variables
// (TENURE_DYNAMODB_ENDPOINT, TENURE_VERSITYGW_ENDPOINT, TENURE_VERSITYGW_ACCESS_KEY,
// TENURE_VERSITYGW_SECRET_KEY, TENURE_MINIO_ENDPOINT, TENURE_MINIO_ACCESS_KEY,
// TENURE_MINIO_SECRET_KEY, TENURE_POSTGRES_URL, TENURE_ETCD_ENDPOINT, TENURE_ETCD_AUTH_ENDPOINT, TENURE_GCS_ENDPOINT,
// TENURE_AZURITE_ENDPOINT, TENURE_AZURITE_ACCOUNT, TENURE_AZURITE_KEY, TENURE_KUBE_URL,
// TENURE_REDIS_URL, TENURE_NATS_URL, TENURE_NATS_SERVER). A test that needs a server the environment does not
// name is skipped, or failed when Required reports true (in CI), so that a missing
// server can never pass silently there.
//
// By convention every test function that talks to a real server has a name that
// starts with TestIntegration, so `make integration` can select them.
package testservers

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"k8s.io/client-go/rest"

	"github.com/tenure-go/tenure/internal/testservers/servers"
)

// Environment variables read by this package.
const (
	EnvDynamoDBEndpoint   = "TENURE_DYNAMODB_ENDPOINT"
	EnvVersityGWEndpoint  = "TENURE_VERSITYGW_ENDPOINT"
	EnvVersityGWAccessKey = "TENURE_VERSITYGW_ACCESS_KEY"
	EnvVersityGWSecretKey = "TENURE_VERSITYGW_SECRET_KEY"
	EnvMinIOEndpoint      = "TENURE_MINIO_ENDPOINT"
	EnvMinIOAccessKey     = "TENURE_MINIO_ACCESS_KEY"
	EnvMinIOSecretKey     = "TENURE_MINIO_SECRET_KEY"
	EnvPostgresURL        = "TENURE_POSTGRES_URL"
	EnvEtcdEndpoint       = "TENURE_ETCD_ENDPOINT"
	EnvEtcdAuthEndpoint   = "TENURE_ETCD_AUTH_ENDPOINT"
	EnvGCSEndpoint        = "TENURE_GCS_ENDPOINT"
	EnvAzuriteEndpoint    = "TENURE_AZURITE_ENDPOINT"
	EnvAzuriteAccount     = "TENURE_AZURITE_ACCOUNT"
	EnvAzuriteKey         = "TENURE_AZURITE_KEY"
	EnvKubeURL            = "TENURE_KUBE_URL"
	EnvRedisURL           = "TENURE_REDIS_URL"
	EnvNATSURL            = "TENURE_NATS_URL"
	EnvNATSServer         = "TENURE_NATS_SERVER"
	EnvRequireServers     = "TENURE_REQUIRE_SERVERS"
)

// Region is the region every client is configured with.
const Region = "us-east-1"

// SetupTimeout bounds each setup or cleanup call this package makes on a server.
const SetupTimeout = 30 * time.Second

// hint tells a reader how to get the servers.
const hint = "run the tests under the servers: make test, make integration, or scripts/testservers.sh run -- go test ./..."

// Required reports whether a missing server must fail the test instead of skipping
// it: true when CI=true or TENURE_REQUIRE_SERVERS=1.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv(EnvRequireServers) == "1"
}

// missing skips t, or fails it when Required.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...) + "; " + hint
	if Required() {
		t.Fatalf("%s (servers are required: CI=true or %s=1)", msg, EnvRequireServers)
	}
	t.Skip(msg)
}

// DynamoDB returns a client for DynamoDB Local at $TENURE_DYNAMODB_ENDPOINT:
// static dummy credentials, region us-east-1, response CRC32 validation off (DynamoDB
// Local's error responses carry no CRC, which would make the SDK warn), retries left
// at the SDK default. Without the environment variable it skips the test, or fails
// it when Required.
func DynamoDB(t testing.TB) *dynamodb.Client {
	t.Helper()
	endpoint := os.Getenv(EnvDynamoDBEndpoint)
	if endpoint == "" {
		missing(t, "DynamoDB Local is not configured: %s is not set", EnvDynamoDBEndpoint)
	}
	cfg := aws.Config{
		Region:      Region,
		Credentials: credentials.NewStaticCredentialsProvider("tenure", "tenure", ""),
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.DisableValidateResponseChecksum = true
	})
}

// Postgres returns the libpq connection URL of the PostgreSQL server at
// $TENURE_POSTGRES_URL, e.g. postgres://tenure@127.0.0.1:PORT/postgres?sslmode=disable
// as scripts/testservers.sh sets it. Without the environment variable it skips the
// test, or fails it when Required.
func Postgres(t testing.TB) string {
	t.Helper()
	url := os.Getenv(EnvPostgresURL)
	if url == "" {
		missing(t, "PostgreSQL is not configured: %s is not set", EnvPostgresURL)
	}
	return url
}

// Etcd returns the client address (HOST:PORT, plain HTTP) of the etcd server
// at $TENURE_ETCD_ENDPOINT. Without it, it skips the test, or fails it when
// Required.
func Etcd(t testing.TB) string {
	t.Helper()
	return need(t, EnvEtcdEndpoint, "etcd")
}

// EtcdAuth returns the client address of the second etcd server, the one
// with authentication on ($TENURE_ETCD_AUTH_ENDPOINT): the user root
// (password servers.EtcdRootPassword) may do anything, the user tenure
// (servers.EtcdTenurePassword) may log in and nothing else. Without it,
// it skips the test, or fails it when Required.
func EtcdAuth(t testing.TB) string {
	t.Helper()
	return need(t, EnvEtcdAuthEndpoint, "etcd with authentication")
}

// Kube returns the configuration of a client of the kube-apiserver at
// $TENURE_KUBE_URL, as user: "admin" (in system:masters), or one of
// "alice", "bob" and "carol", who may do nothing until a test binds them a
// Role. Without it, it skips the test, or fails it when Required.
func Kube(t testing.TB, user string) *rest.Config {
	t.Helper()
	url := need(t, EnvKubeURL, "kube-apiserver")
	token := servers.KubeToken(user)
	if user == "admin" {
		token = servers.KubeAdminToken
	}
	// The API server's certificate is its own, self-signed, on loopback.
	return &rest.Config{Host: url, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: -1}
}

// GCS returns the base URL (http://HOST:PORT) of the fake-gcs-server at
// $TENURE_GCS_ENDPOINT. Without it, it skips the test, or fails it when
// Required.
func GCS(t testing.TB) string {
	t.Helper()
	return need(t, EnvGCSEndpoint, "fake-gcs-server")
}

// AzuriteServer is the Azurite blob service under test and its account.
type AzuriteServer struct {
	Endpoint string // the account's URL: http://HOST:PORT/ACCOUNT
	Account  string
	Key      string // the account key, base64
}

// Azurite returns the Azurite blob service at $TENURE_AZURITE_ENDPOINT.
// Without it, it skips the test, or fails it when Required.
func Azurite(t testing.TB) AzuriteServer {
	t.Helper()
	return AzuriteServer{need(t, EnvAzuriteEndpoint, "Azurite"), os.Getenv(EnvAzuriteAccount), os.Getenv(EnvAzuriteKey)}
}

// Redis returns the URL of the Redis server at $TENURE_REDIS_URL
// (redis://127.0.0.1:PORT/0, no password). Without it, it skips the test,
// or fails it when Required.
func Redis(t testing.TB) string {
	t.Helper()
	return need(t, EnvRedisURL, "Redis")
}

// NATS returns the URL of the NATS server (with JetStream) at
// $TENURE_NATS_URL. Without it, it skips the test, or fails it when
// Required.
func NATS(t testing.TB) string {
	t.Helper()
	return need(t, EnvNATSURL, "NATS")
}

func need(t testing.TB, env, what string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		missing(t, "%s is not configured: %s is not set", what, env)
	}
	return v
}

// S3Server is one S3-compatible server under test.
type S3Server struct {
	Name      string // "versitygw" or "minio"
	Endpoint  string // e.g. http://127.0.0.1:43123
	AccessKey string
	SecretKey string
}

// s3Env names the environment variables of one S3 server.
type s3Env struct{ name, endpoint, accessKey, secretKey string }

var s3Envs = []s3Env{
	{"versitygw", EnvVersityGWEndpoint, EnvVersityGWAccessKey, EnvVersityGWSecretKey},
	{"minio", EnvMinIOEndpoint, EnvMinIOAccessKey, EnvMinIOSecretKey},
}

// S3Servers returns the configured S3 servers, in the order versitygw, minio. A
// server is configured when its endpoint variable is set; its key variables must
// then be set too, or the test fails. When none is configured the test is skipped
// (failed when Required). When only some are configured, the missing ones fail the
// test when Required and are logged otherwise.
func S3Servers(t testing.TB) []S3Server {
	t.Helper()
	var servers []S3Server
	var absent []string
	for _, e := range s3Envs {
		endpoint := os.Getenv(e.endpoint)
		if endpoint == "" {
			absent = append(absent, fmt.Sprintf("%s (%s)", e.name, e.endpoint))
			continue
		}
		s := S3Server{
			Name:      e.name,
			Endpoint:  endpoint,
			AccessKey: os.Getenv(e.accessKey),
			SecretKey: os.Getenv(e.secretKey),
		}
		if s.AccessKey == "" || s.SecretKey == "" {
			t.Fatalf("%s is set but %s or %s is empty", e.endpoint, e.accessKey, e.secretKey)
		}
		servers = append(servers, s)
	}
	switch {
	case len(servers) == 0:
		missing(t, "no S3 server is configured: %s not set", strings.Join(absent, ", "))
	case len(absent) > 0 && Required():
		t.Fatalf("S3 servers not configured: %s (servers are required: CI=true or %s=1); %s",
			strings.Join(absent, ", "), EnvRequireServers, hint)
	case len(absent) > 0:
		t.Logf("S3 servers not configured, not tested: %s", strings.Join(absent, ", "))
	}
	return servers
}

// Client returns an S3 client for the server: path-style addressing, region
// us-east-1, static credentials, and request checksums computed and response
// checksums validated only when an operation requires it, which S3-compatible
// servers accept.
func (s S3Server) Client() *s3.Client {
	cfg := aws.Config{
		Region:      Region,
		Credentials: credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(s.Endpoint)
		o.UsePathStyle = true
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
}

// NewBucket creates a bucket with a unique valid name on c and returns the name. At
// test cleanup it deletes every object in the bucket and the bucket itself, best
// effort: errors are logged, not fatal.
func NewBucket(t testing.TB, c *s3.Client) string {
	t.Helper()
	name := "tenure-test-" + randomHex(8) // 28 characters: lowercase letters, digits, hyphens
	ctx, cancel := context.WithTimeout(context.Background(), SetupTimeout)
	defer cancel()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), SetupTimeout)
		defer cancel()
		if err := deleteBucket(ctx, c, name); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
	return name
}

// deleteBucket deletes every object in the bucket, one at a time (DeleteObjects needs
// a Content-MD5 or checksum header that not every server takes the same way), then
// the bucket.
func deleteBucket(ctx context.Context, c *s3.Client, bucket string) error {
	var errs []error
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("list objects in bucket %s: %w", bucket, err))
			break
		}
		for _, o := range page.Contents {
			if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: o.Key}); err != nil {
				errs = append(errs, fmt.Errorf("delete object %s/%s: %w", bucket, aws.ToString(o.Key), err))
			}
		}
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
		errs = append(errs, fmt.Errorf("delete bucket %s: %w", bucket, err))
	}
	return errors.Join(errs...)
}

// UniqueName returns prefix + "-" + 12 lowercase hex digits, valid as a DynamoDB
// table name and as part of an S3 key when prefix is. Within a process the names
// never repeat (a counter over a random start); across processes sharing a server
// they collide with odds of about 1 in 2^48 per pair. Drawing fresh random digits
// per call, as this once did, repeated a name in CI: the birthday bound over 32 bits
// is not small at a thousand names.
func UniqueName(prefix string) string {
	n := (nameBase + nameSeq.Add(1)) & (1<<48 - 1)
	return fmt.Sprintf("%s-%012x", prefix, n)
}

var (
	nameBase = func() uint64 {
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
		return binary.LittleEndian.Uint64(b[:])
	}()
	nameSeq atomic.Uint64
)

// randomHex returns 2n random lowercase hex digits.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never returns an error
	return hex.EncodeToString(b)
}
