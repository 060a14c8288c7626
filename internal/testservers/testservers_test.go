package testservers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

func TestUniqueName(t *testing.T) {
	valid := regexp.MustCompile(`^lease-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		n := UniqueName("lease")
		if !valid.MatchString(n) {
			t.Fatalf("UniqueName(%q) = %q, want lease-<12 hex>", "lease", n)
		}
		if seen[n] {
			t.Fatalf("UniqueName returned %q twice", n)
		}
		seen[n] = true
	}
}

func TestRequired(t *testing.T) {
	for _, tc := range []struct {
		ci, require string
		want        bool
	}{
		{"", "", false},
		{"true", "", true},
		{"false", "", false},
		{"", "1", true},
		{"", "0", false},
	} {
		t.Setenv("CI", tc.ci)
		t.Setenv(EnvRequireServers, tc.require)
		if got := Required(); got != tc.want {
			t.Errorf("CI=%q %s=%q: Required() = %v, want %v", tc.ci, EnvRequireServers, tc.require, got, tc.want)
		}
	}
}

// TestIntegrationServersDynamoDB checks that DynamoDB Local answers and that it
// reports a failed condition the way the dynamolease backend expects.
func TestIntegrationServersDynamoDB(t *testing.T) {
	c := DynamoDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), SetupTimeout)
	defer cancel()

	if _, err := c.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("ListTables: %v", err)
	}

	table := UniqueName("tenure-probe")
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), SetupTimeout)
		defer cancel()
		if _, err := c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			t.Logf("cleanup: delete table %s: %v", table, err)
		}
	})

	put := func(v string) error {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(table),
			Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "lease"},
				"v":  &types.AttributeValueMemberS{Value: v},
			},
			ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		return err
	}
	if err := put("first"); err != nil {
		t.Fatalf("first conditional PutItem: %v", err)
	}
	err = put("second")
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("second conditional PutItem: got %v, want ConditionalCheckFailedException", err)
	}
	if v, ok := ccf.Item["v"].(*types.AttributeValueMemberS); ok && v.Value == "first" {
		t.Logf("ConditionalCheckFailedException carries the stored item (ReturnValuesOnConditionCheckFailure=ALL_OLD)")
	} else {
		t.Logf("ConditionalCheckFailedException does not carry the stored item: %#v", ccf.Item)
	}

	got, err := c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "lease"}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	if v, ok := got.Item["v"].(*types.AttributeValueMemberS); !ok || v.Value != "first" {
		t.Fatalf("GetItem: got %#v, want v=first", got.Item)
	}
}

// TestIntegrationServersS3 checks each S3 server: buckets, objects, and the
// conditional writes the s3lease backend is built on (If-None-Match: * to create,
// If-Match: etag to replace), including under concurrent writers. Its log lines
// document how each server answers.
func TestIntegrationServersS3(t *testing.T) {
	for _, srv := range S3Servers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			t.Parallel()
			testS3Server(t, srv)
		})
	}
}

func testS3Server(t *testing.T, srv S3Server) {
	c := srv.Client()
	bucket := NewBucket(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), SetupTimeout)
	defer cancel()

	type cond struct{ ifMatch, ifNoneMatch string }
	put := func(key, body string, cd cond) (string, error) {
		in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)}
		if cd.ifMatch != "" {
			in.IfMatch = aws.String(cd.ifMatch)
		}
		if cd.ifNoneMatch != "" {
			in.IfNoneMatch = aws.String(cd.ifNoneMatch)
		}
		out, err := c.PutObject(ctx, in)
		if err != nil {
			return "", err
		}
		return aws.ToString(out.ETag), nil
	}
	get := func(key string) (body, etag string) {
		t.Helper()
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("GetObject %s: %v", key, err)
		}
		defer out.Body.Close()
		b, err := io.ReadAll(out.Body)
		if err != nil {
			t.Fatalf("GetObject %s: read body: %v", key, err)
		}
		return string(b), aws.ToString(out.ETag)
	}
	wantPrecondition := func(what string, err error) {
		t.Helper()
		status, code := describe(err)
		if status != 412 {
			t.Errorf("%s: got %v, want HTTP 412", what, err)
			return
		}
		t.Logf("%s: HTTP %d %s", what, status, code)
	}

	// Plain put and get.
	etag, err := put("plain", "hello", cond{})
	if err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	body, getETag := get("plain")
	if body != "hello" {
		t.Fatalf("GetObject body = %q, want %q", body, "hello")
	}
	if getETag != etag {
		t.Errorf("GetObject ETag %s differs from PutObject ETag %s", getETag, etag)
	}
	t.Logf("PutObject ETag as returned: %s (quoted: %v)", etag, strings.HasPrefix(etag, `"`))
	again, err := put("plain", "hello", cond{})
	if err != nil {
		t.Fatalf("PutObject same content again: %v", err)
	}
	if again == etag {
		t.Logf("rewriting identical content keeps the ETag (%s): If-Match cannot tell the two writes apart", again)
	} else {
		t.Logf("rewriting identical content changes the ETag: %s -> %s", etag, again)
	}

	// Create only if absent.
	created, err := put("lease", "v1", cond{ifNoneMatch: "*"})
	if err != nil {
		t.Fatalf("PutObject If-None-Match: * on a new key: %v", err)
	}
	_, err = put("lease", "v1-again", cond{ifNoneMatch: "*"})
	wantPrecondition("PutObject If-None-Match: * on an existing key", err)

	// Replace only if unchanged.
	_, err = put("lease", "v2-wrong", cond{ifMatch: `"00000000000000000000000000000000"`})
	wantPrecondition("PutObject If-Match: wrong ETag", err)
	replaced, err := put("lease", "v2", cond{ifMatch: created})
	if err != nil {
		t.Fatalf("PutObject If-Match: current ETag: %v", err)
	}
	_, err = put("lease", "v3-stale", cond{ifMatch: created})
	wantPrecondition("PutObject If-Match: stale ETag", err)
	if body, _ := get("lease"); body != "v2" {
		t.Fatalf("after conditional puts the object holds %q, want %q", body, "v2")
	}

	// Behaviours worth knowing, logged rather than asserted.
	if _, err := put("lease", "v3-unquoted", cond{ifMatch: strings.Trim(replaced, `"`)}); err != nil {
		status, code := describe(err)
		t.Logf("PutObject If-Match: current ETag without quotes: rejected, HTTP %d %s", status, code)
	} else {
		t.Logf("PutObject If-Match: current ETag without quotes: accepted")
	}
	if _, err := put(UniqueName("absent"), "x", cond{ifMatch: created}); err != nil {
		status, code := describe(err)
		t.Logf("PutObject If-Match on a missing key: HTTP %d %s (AWS S3: 404 NoSuchKey)", status, code)
	} else {
		t.Errorf("PutObject If-Match on a missing key succeeded")
	}

	// Concurrent writers: exactly one conditional write may win each round. Every
	// body is unique: the ETag is the MD5 of the content, so a writer that rewrote
	// bytes already stored would leave the ETag unchanged and a second If-Match
	// writer would rightly succeed too.
	const writers, rounds = 8, 5
	race := func(what, key string, cd cond) string {
		t.Helper()
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []string
			codes   = map[string]int{}
		)
		for w := range writers {
			wg.Go(func() {
				body := fmt.Sprintf("%s: writer %d", what, w)
				_, err := put(key, body, cd)
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					winners = append(winners, body)
					return
				}
				status, code := describe(err)
				codes[fmt.Sprintf("%d %s", status, code)]++
				if status != 412 && status != 409 {
					t.Errorf("%s: unexpected error: %v", what, err)
				}
			})
		}
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("%s: %d of %d concurrent writers succeeded (%v), want exactly 1; failures: %v", what, len(winners), writers, winners, codes)
		}
		if body, _ := get(key); body != winners[0] {
			t.Fatalf("%s: object holds %q, want the winner's %q", what, body, winners[0])
		}
		t.Logf("%s: 1 winner, failures: %v", what, codes)
		_, etag := get(key)
		return etag
	}
	for r := range rounds {
		key := UniqueName("race")
		etag := race(fmt.Sprintf("round %d: %d concurrent If-None-Match: *", r, writers), key, cond{ifNoneMatch: "*"})
		race(fmt.Sprintf("round %d: %d concurrent If-Match", r, writers), key, cond{ifMatch: etag})
	}
}

// describe returns the HTTP status and the S3 error code of err, or 0 and "".
func describe(err error) (status int, code string) {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	return status, code
}

func TestPostgres(t *testing.T) {
	const url = "postgres://tenure@127.0.0.1:5432/postgres?sslmode=disable"
	t.Setenv(EnvPostgresURL, url)
	if got := Postgres(t); got != url {
		t.Errorf("Postgres() = %q, want %q", got, url)
	}
}
