package dynamolease_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/dynamolease"
	"github.com/tenure-go/tenure/lease/leasetest"
)

// newTable creates a table with a unique name on DynamoDB Local with
// CreateTable and deletes it when the test ends.
func newTable(t testing.TB, c *dynamodb.Client, opts dynamolease.TableOptions) string {
	t.Helper()
	table := testservers.UniqueName("tenure-dynamolease")
	ctx, cancel := context.WithTimeout(context.Background(), testservers.SetupTimeout)
	defer cancel()
	if err := dynamolease.CreateTable(ctx, c, table, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testservers.SetupTimeout)
		defer cancel()
		if _, err := c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			t.Logf("cleanup: delete table %s: %v", table, err)
		}
	})
	return table
}

func newStore(t testing.TB, api dynamolease.API, cfg dynamolease.Config) *dynamolease.Store {
	t.Helper()
	s, err := dynamolease.New(api, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestIntegrationConformance(t *testing.T) {
	c := testservers.DynamoDB(t)
	t.Run("dynamodb-local", func(t *testing.T) {
		table := newTable(t, c, dynamolease.TableOptions{})
		leasetest.Run(t, func(t *testing.T) lease.Store {
			return newStore(t, c, dynamolease.Config{Table: table})
		})
	})
	// The same suite with a key attribute of another name and TTL on, the
	// other shape of item the store writes.
	t.Run("dynamodb-local-ttl", func(t *testing.T) {
		opts := dynamolease.TableOptions{KeyAttribute: "pk", TTLAttribute: "expires_at"}
		table := newTable(t, c, opts)
		leasetest.Run(t, func(t *testing.T) lease.Store {
			return newStore(t, c, dynamolease.Config{Table: table, KeyAttribute: "pk", TTLAttribute: "expires_at"})
		})
	})
}

func record(holder string, token uint64, nonce string) lease.Record {
	return lease.Record{
		Holder:    holder,
		Token:     token,
		Duration:  10 * time.Second,
		Nonce:     nonce,
		WrittenAt: time.Now(),
	}
}

// TestIntegrationBadRecords writes items by hand that are not valid records,
// one subtest each. Get must name the lease and the field, and a create must
// conflict with the item rather than take it over.
func TestIntegrationBadRecords(t *testing.T) {
	c := testservers.DynamoDB(t)
	table := newTable(t, c, dynamolease.TableOptions{})
	store := newStore(t, c, dynamolease.Config{Table: table})

	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	valid := func() map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"holder":      s("host-a"),
			"token":       n("3"),
			"duration_ns": n("10000000000"),
			"released":    &types.AttributeValueMemberBOOL{Value: false},
			"nonce":       s("n-1"),
			"written_at":  s("2026-05-28T12:00:00.123456789Z"),
			"payload":     &types.AttributeValueMemberB{Value: []byte("addr")},
			"version":     s("hand-made"),
		}
	}
	with := func(attr string, av types.AttributeValue) map[string]types.AttributeValue {
		item := valid()
		item[attr] = av
		return item
	}
	without := func(attr string) map[string]types.AttributeValue {
		item := valid()
		delete(item, attr)
		return item
	}
	cases := []struct {
		label string
		item  map[string]types.AttributeValue
		field string
	}{
		{"token-as-string", with("token", s("3")), "token"},
		{"token-negative", with("token", n("-3")), "token"},
		{"token-fraction", with("token", n("3.5")), "token"},
		{"token-zero", with("token", n("0")), "token"},
		{"token-missing", without("token"), "token"},
		{"duration-negative", with("duration_ns", n("-10000000000")), "duration"},
		{"duration-as-string", with("duration_ns", s("10s")), "duration"},
		{"duration-too-long", with("duration_ns", n("86400000000001")), "duration"},
		{"holder-missing", without("holder"), "holder"},
		{"holder-as-number", with("holder", n("7")), "holder"},
		{"holder-empty", with("holder", s("")), "holder"},
		{"released-as-string", with("released", s("true")), "released"},
		{"nonce-missing", without("nonce"), "nonce"},
		{"written-at-as-number", with("written_at", n("1780000000000")), "written_at"},
		{"payload-oversized", with("payload", &types.AttributeValueMemberB{Value: make([]byte, lease.MaxPayloadLen+1)}), "payload"},
		{"payload-as-string", with("payload", s("addr")), "payload"},
		{"version-missing", without("version"), "version"},
		{"garbage", map[string]types.AttributeValue{
			"owner": s("someone else's program"),
			"data":  &types.AttributeValueMemberL{Value: []types.AttributeValue{n("1"), s("x")}},
		}, "holder"},
	}
	for _, tc := range cases {
		t.Run(tc.label, func(t *testing.T) {
			ctx := t.Context()
			name := "bad/" + tc.label
			tc.item["lease"] = s(name)
			if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: tc.item}); err != nil {
				t.Fatalf("raw PutItem: %v", err)
			}

			rec, v, err := store.Get(ctx, name)
			var re *lease.RecordError
			if !errors.As(err, &re) {
				t.Fatalf("Get = %+v, %q, %v; want a *lease.RecordError", rec, v, err)
			}
			if re.Field != tc.field || re.Name != name {
				t.Errorf("Get: RecordError names field %q of %q, want %q of %q (%v)", re.Field, re.Name, tc.field, name, err)
			}
			if !errors.Is(err, lease.ErrInvalidRecord) {
				t.Errorf("Get: %v does not match lease.ErrInvalidRecord", err)
			}

			_, err = store.Put(ctx, name, record("taker", 1, "n-take"), lease.NoVersion)
			if !errors.Is(err, lease.ErrConflict) || errors.Is(err, lease.ErrInvalidRecord) {
				t.Errorf("Put expecting NoVersion over the item: %v, want a conflict (and not a rejection of the caller's record)", err)
			}
			out, err := c.GetItem(ctx, &dynamodb.GetItemInput{
				TableName:      aws.String(table),
				Key:            map[string]types.AttributeValue{"lease": s(name)},
				ConsistentRead: aws.Bool(true),
			})
			if err != nil {
				t.Fatal(err)
			}
			if h, ok := out.Item["holder"].(*types.AttributeValueMemberS); ok && h.Value == "taker" {
				t.Errorf("the item was taken over: %v", out.Item)
			}
		})
	}
}

// TestIntegrationConflictCarriesRecord checks the record DynamoDB Local
// returns with a failed condition (ALL_OLD) against what Get reads.
func TestIntegrationConflictCarriesRecord(t *testing.T) {
	c := testservers.DynamoDB(t)
	store := newStore(t, c, dynamolease.Config{Table: newTable(t, c, dynamolease.TableOptions{})})
	ctx := t.Context()

	held := record("a", 5, "n-a")
	held.Payload = []byte("addr=10.0.0.1")
	v, err := store.Put(ctx, "x", held, lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.Put(ctx, "x", record("b", 1, "n-b"), lease.NoVersion)
	var ce *lease.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("create over a record: %v, want a *lease.ConflictError", err)
	}
	if !ce.Found || ce.Version != v || !ce.Current.Equal(held) {
		t.Errorf("ConflictError carries %+v at %q (found %v), want %+v at %q", ce.Current, ce.Version, ce.Found, held, v)
	}
	if want := `lease "x": conflict: held by "a" with token 5`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

// TestIntegrationMissingTable checks that a missing table gives an error that
// names it and matches ErrTableNotFound.
func TestIntegrationMissingTable(t *testing.T) {
	c := testservers.DynamoDB(t)
	table := testservers.UniqueName("tenure-no-such-table")
	store := newStore(t, c, dynamolease.Config{Table: table})
	ctx := t.Context()

	_, _, err := store.Get(ctx, "x")
	wantMissingTable(t, "Get", err, table, `get lease "x"`)
	_, err = store.Put(ctx, "x", record("a", 1, "n-1"), lease.NoVersion)
	wantMissingTable(t, "Put", err, table, `put lease "x"`)
}

// TestIntegrationWrongKeyAttribute checks that a Config whose key attribute
// does not match the table's gives an error that says so.
func TestIntegrationWrongKeyAttribute(t *testing.T) {
	c := testservers.DynamoDB(t)
	table := newTable(t, c, dynamolease.TableOptions{}) // key "lease"
	store := newStore(t, c, dynamolease.Config{Table: table, KeyAttribute: "pk"})
	ctx := t.Context()

	hint := fmt.Sprintf("table %q: ValidationException", table)
	ask := fmt.Sprintf("is the partition key named %q", "pk")
	if _, _, err := store.Get(ctx, "x"); err == nil || !strings.Contains(err.Error(), hint) || !strings.Contains(err.Error(), ask) || !errors.Is(err, lease.ErrPermanent) {
		t.Errorf("Get: %v, want a permanent error naming %q and asking %q", err, hint, ask)
	}
	if _, err := store.Put(ctx, "x", record("a", 1, "n-1"), lease.NoVersion); err == nil || !strings.Contains(err.Error(), hint) || !errors.Is(err, lease.ErrPermanent) {
		t.Errorf("Put: %v, want a permanent error naming %q", err, hint)
	}
}

func wantMissingTable(t *testing.T, op string, err error, table, prefix string) {
	t.Helper()
	var rnf *types.ResourceNotFoundException
	switch {
	case !errors.Is(err, dynamolease.ErrTableNotFound):
		t.Errorf("%s: %v, want an error matching ErrTableNotFound", op, err)
	case !errors.As(err, &rnf):
		t.Errorf("%s: %v does not wrap the SDK's ResourceNotFoundException", op, err)
	case !strings.Contains(err.Error(), strconv.Quote(table)) || !strings.HasPrefix(err.Error(), prefix):
		t.Errorf("%s: %q, want it to start %s and name table %q", op, err, prefix, table)
	case errors.Is(err, lease.ErrNotFound):
		t.Errorf("%s: %v matches lease.ErrNotFound: a missing table is not a missing lease", op, err)
	case !errors.Is(err, lease.ErrPermanent) || !strings.Contains(err.Error(), "ResourceNotFoundException"):
		t.Errorf("%s: %v, want a permanent error naming the error code", op, err)
	}
}

// transport is an aws.HTTPClient that sends requests on to DynamoDB Local
// through the SDK's own client and lets a test act on each one.
type transport struct {
	next   aws.HTTPClient
	before func(r *http.Request)                                              // called before sending, if set
	after  func(r *http.Request, resp *http.Response) (*http.Response, error) // called on each answer, if set
}

func (tr *transport) Do(r *http.Request) (*http.Response, error) {
	if tr.before != nil {
		tr.before(r)
	}
	resp, err := tr.next.Do(r)
	if err != nil || tr.after == nil {
		return resp, err
	}
	return tr.after(r, resp)
}

// withTransport returns a copy of c whose requests go through tr. It retries
// like the SDK's standard retryer but without waiting between attempts.
func withTransport(c *dynamodb.Client, tr *transport) *dynamodb.Client {
	return dynamodb.New(c.Options(), func(o *dynamodb.Options) {
		tr.next = o.HTTPClient
		o.HTTPClient = tr
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		})
	})
}

func isPutItem(r *http.Request) bool {
	return r.Header.Get("X-Amz-Target") == "DynamoDB_20120810.PutItem"
}

// TestIntegrationCancelledInFlight cancels the context while the request is
// on its way, past the store's own check, so that what comes back is the
// SDK's error.
func TestIntegrationCancelledInFlight(t *testing.T) {
	base := testservers.DynamoDB(t)
	table := newTable(t, base, dynamolease.TableOptions{})
	seed := newStore(t, base, dynamolease.Config{Table: table})
	stored := record("a", 1, "n-1")
	v, err := seed.Put(t.Context(), "x", stored, lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}

	var cancel atomic.Pointer[context.CancelFunc]
	c := withTransport(base, &transport{before: func(*http.Request) { (*cancel.Load())() }})
	store := newStore(t, c, dynamolease.Config{Table: table})
	ctxFor := func() context.Context {
		ctx, f := context.WithCancel(t.Context())
		cancel.Store(&f)
		return ctx
	}

	_, _, err = store.Get(ctxFor(), "x")
	if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), `get lease "x": `) {
		t.Errorf("Get cancelled in flight: %v, want an error matching context.Canceled that names the lease", err)
	}
	_, err = store.Put(ctxFor(), "x", record("b", 2, "n-2"), v)
	if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), `put lease "x": `) {
		t.Errorf("Put cancelled in flight: %v, want an error matching context.Canceled that names the lease", err)
	}

	// An expired deadline is caught before sending.
	ctx, stop := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer stop()
	if _, _, err := seed.Get(ctx, "x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get past the deadline: %v, want an error matching context.DeadlineExceeded", err)
	}
	if _, err := seed.Put(ctx, "x", record("b", 2, "n-3"), v); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Put past the deadline: %v, want an error matching context.DeadlineExceeded", err)
	}

	// The cancelled request never reached the server (the SDK checks the
	// context before dialling), so the record is unchanged.
	if got, gotV, err := seed.Get(t.Context(), "x"); err != nil || gotV != v || got.Nonce != stored.Nonce {
		t.Errorf("after the cancelled Put: %+v at %q, %v; want the stored record at %q", got, gotV, err, v)
	}
}

// TestIntegrationRetryAfterLostResponse makes DynamoDB Local apply a PutItem
// and then drops its answer, as a broken connection would. The SDK retries;
// the retry's condition fails against the item the first attempt wrote, and
// Put must still report success with the version it wrote, not a conflict.
func TestIntegrationRetryAfterLostResponse(t *testing.T) {
	base := testservers.DynamoDB(t)
	table := newTable(t, base, dynamolease.TableOptions{})

	var lose, lost, puts atomic.Int32
	c := withTransport(base, &transport{after: func(r *http.Request, resp *http.Response) (*http.Response, error) {
		if !isPutItem(r) {
			return resp, nil
		}
		puts.Add(1)
		if lose.Add(-1) < 0 {
			lose.Store(0)
			return resp, nil
		}
		lost.Add(1)
		resp.Body.Close()
		// The SDK retries errors that say "connection reset".
		return nil, fmt.Errorf("read tcp: connection reset by peer (injected after the server applied the request)")
	}})
	store := newStore(t, c, dynamolease.Config{Table: table})
	ctx := t.Context()

	first := record("a", 1, "n-1")
	lose.Store(1)
	v1, err := store.Put(ctx, "x", first, lease.NoVersion)
	if err != nil {
		t.Fatalf("create whose first answer was lost: %v", err)
	}
	renewed := record("a", 1, "n-2")
	lose.Store(1)
	v2, err := store.Put(ctx, "x", renewed, v1)
	if err != nil {
		t.Fatalf("update whose first answer was lost: %v", err)
	}
	if lost.Load() != 2 || puts.Load() != 4 {
		t.Fatalf("%d answers lost in %d PutItem requests, want 2 in 4: the SDK did not retry as expected", lost.Load(), puts.Load())
	}
	got, gotV, err := store.Get(ctx, "x")
	if err != nil || gotV != v2 || !got.Equal(renewed) {
		t.Errorf("Get = %+v at %q, %v; want %+v at %q", got, gotV, err, renewed, v2)
	}
}

// TestIntegrationLostResponseReadBack shows the other way an ambiguous write
// is settled, through leasetest.Faults: the caller gets an error, reads back,
// and compares the nonce.
func TestIntegrationLostResponseReadBack(t *testing.T) {
	c := testservers.DynamoDB(t)
	store := newStore(t, c, dynamolease.Config{Table: newTable(t, c, dynamolease.TableOptions{})})
	f := leasetest.NewFaults(store)
	ctx := t.Context()

	f.LosePutResponses(1)
	rec := record("a", 1, "n-ambiguous")
	if _, err := f.Put(ctx, "x", rec, lease.NoVersion); !errors.Is(err, leasetest.ErrLostResponse) {
		t.Fatalf("Put: %v, want a lost response", err)
	}
	got, v, err := f.Get(ctx, "x")
	if err != nil || got.Nonce != rec.Nonce {
		t.Fatalf("read back: %+v, %v; want the record with nonce %q", got, err, rec.Nonce)
	}
	// The version read back is current: the next write goes through.
	if _, err := f.Put(ctx, "x", record("a", 1, "n-next"), v); err != nil {
		t.Fatalf("renewal after reading back: %v", err)
	}
	if gets, puts := f.Counts(); gets != 1 || puts != 2 {
		t.Errorf("Counts() = %d gets, %d puts; want 1, 2", gets, puts)
	}
}

// TestIntegrationTTLAttribute checks the TTL a write stores and that
// CreateTable turned TTL on for it.
func TestIntegrationTTLAttribute(t *testing.T) {
	c := testservers.DynamoDB(t)
	opts := dynamolease.TableOptions{TTLAttribute: "expires_at"}
	table := newTable(t, c, opts)
	store := newStore(t, c, dynamolease.Config{Table: table, TTLAttribute: "expires_at", TTLSlack: 48 * time.Hour})
	ctx := t.Context()

	before := time.Now()
	if _, err := store.Put(ctx, "x", record("a", 1, "n-1"), lease.NoVersion); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	out, err := c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]types.AttributeValue{"lease": &types.AttributeValueMemberS{Value: "x"}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	n, ok := out.Item["expires_at"].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("expires_at = %#v, want type N", out.Item["expires_at"])
	}
	exp, err := strconv.ParseInt(n.Value, 10, 64)
	lo, hi := before.Add(10*time.Second+48*time.Hour).Unix(), after.Add(10*time.Second+48*time.Hour).Unix()+1
	if err != nil || exp < lo || exp > hi {
		t.Errorf("expires_at = %s, want between %d and %d (write time + 10s + 48h)", n.Value, lo, hi)
	}

	ttl, err := c.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if d := ttl.TimeToLiveDescription; d == nil || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != "expires_at" {
		t.Errorf("TTL on the table: %+v, want ENABLED on expires_at", d)
	}
}

// TestIntegrationCreateTable checks that CreateTable is idempotent and refuses
// a table or TTL setting that does not fit.
func TestIntegrationCreateTable(t *testing.T) {
	c := testservers.DynamoDB(t)
	ctx := t.Context()
	table := newTable(t, c, dynamolease.TableOptions{})

	if err := dynamolease.CreateTable(ctx, c, table, dynamolease.TableOptions{}); err != nil {
		t.Errorf("again on the existing table: %v", err)
	}
	err := dynamolease.CreateTable(ctx, c, table, dynamolease.TableOptions{KeyAttribute: "pk"})
	if err == nil || !strings.Contains(err.Error(), "HASH lease (S)") || !strings.Contains(err.Error(), "HASH pk (S)") {
		t.Errorf("with another key attribute: %v, want an error showing both key schemas", err)
	}

	desc, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if b := desc.Table.BillingModeSummary; b == nil || b.BillingMode != types.BillingModePayPerRequest {
		t.Errorf("billing mode: %+v, want PAY_PER_REQUEST", b)
	}

	// TTL: on, on again, then refused for another attribute.
	if err := dynamolease.CreateTable(ctx, c, table, dynamolease.TableOptions{TTLAttribute: "expires_at"}); err != nil {
		t.Errorf("turning TTL on: %v", err)
	}
	if err := dynamolease.CreateTable(ctx, c, table, dynamolease.TableOptions{TTLAttribute: "expires_at"}); err != nil {
		t.Errorf("turning TTL on again: %v", err)
	}
	err = dynamolease.CreateTable(ctx, c, table, dynamolease.TableOptions{TTLAttribute: "gone_at"})
	if err == nil || !strings.Contains(err.Error(), `"expires_at"`) {
		t.Errorf("TTL on another attribute: %v, want an error naming expires_at", err)
	}

	// A table made elsewhere with a composite key.
	other := testservers.UniqueName("tenure-dynamolease-composite")
	_, err = c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(other),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("lease"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("lease"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testservers.SetupTimeout)
		defer cancel()
		if _, err := c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(other)}); err != nil {
			t.Logf("cleanup: delete table %s: %v", other, err)
		}
	})
	if err := dynamolease.CreateTable(ctx, c, other, dynamolease.TableOptions{}); err == nil || !strings.Contains(err.Error(), "RANGE sk") {
		t.Errorf("on a table with a sort key: %v, want an error showing the sort key", err)
	}
}
