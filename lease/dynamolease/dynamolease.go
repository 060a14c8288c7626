package dynamolease

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/tenure-go/tenure/lease"
)

// API is the part of the DynamoDB client a Store uses. *dynamodb.Client
// implements it.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// Defaults for the Config fields left zero.
const (
	// defaultKeyAttribute is the partition key attribute (type S) that holds
	// the lease name.
	defaultKeyAttribute = "lease"

	// defaultTTLSlack is how far past the end of the lease a record's TTL
	// lies, when TTL is enabled.
	defaultTTLSlack = 7 * 24 * time.Hour

	// minTTLSlack is the shortest TTLSlack New accepts. It only catches
	// slips such as 7*time.Second; keep the slack at days (see the package
	// documentation).
	minTTLSlack = time.Hour
)

// ErrTableNotFound reports that the table does not exist (DynamoDB's
// ResourceNotFoundException), or is not in the client's region or account.
var ErrTableNotFound = errors.New("dynamolease: table not found")

// Config says which table a Store uses and how its items look.
type Config struct {
	// Table is the name of the DynamoDB table: 3 to 255 characters from
	// a-z, A-Z, 0-9, "_", "-" and "." (a name, not an ARN; the client's
	// region and credentials choose the account). Required.
	Table string

	// KeyAttribute names the table's partition key, of type S, which holds
	// the lease name. It must not be one of the attribute names a record
	// uses (see the package documentation). Default "lease".
	KeyAttribute string

	// TTLAttribute, when set, names an attribute that every write sets to
	// an expiry time in epoch seconds, for DynamoDB's Time to Live to delete
	// abandoned leases. Default "" (no TTL attribute is written). A deleted
	// record is a lost record to tenure: read the package documentation
	// before setting it.
	TTLAttribute string

	// TTLSlack is how long after the end of the lease (write time plus the
	// record's Duration) the TTL lies. Only meaningful with TTLAttribute; at
	// least 1h. Default 7 days.
	TTLSlack time.Duration
}

// validate fills in defaults and reports the first field that is wrong.
func (c *Config) validate() error {
	if err := validateTableName(c.Table); err != nil {
		return err
	}
	if c.KeyAttribute == "" {
		c.KeyAttribute = defaultKeyAttribute
	}
	if err := validateAttributeName("KeyAttribute", c.KeyAttribute); err != nil {
		return err
	}
	if c.TTLAttribute == "" {
		if c.TTLSlack != 0 {
			return fmt.Errorf("dynamolease: TTLSlack is %v but TTLAttribute is empty, so no TTL would be written", c.TTLSlack)
		}
		return nil
	}
	if err := validateAttributeName("TTLAttribute", c.TTLAttribute); err != nil {
		return err
	}
	if c.TTLAttribute == c.KeyAttribute {
		return fmt.Errorf("dynamolease: TTLAttribute and KeyAttribute are both %q", c.KeyAttribute)
	}
	if c.TTLSlack == 0 {
		c.TTLSlack = defaultTTLSlack
	}
	if c.TTLSlack < minTTLSlack {
		return fmt.Errorf("dynamolease: TTLSlack %v is below the minimum %v (a TTL must lie far past the lease)", c.TTLSlack, minTTLSlack)
	}
	return nil
}

// validateTableName applies DynamoDB's rule for table names.
func validateTableName(table string) error {
	if len(table) < 3 || len(table) > 255 {
		return fmt.Errorf("dynamolease: table name %q is %d characters, want 3 to 255", table, len(table))
	}
	for i := 0; i < len(table); i++ {
		c := table[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.' {
			continue
		}
		return fmt.Errorf("dynamolease: table name %q: byte %d (%q) is not allowed (a-z, A-Z, 0-9, _ - . only)", table, i, c)
	}
	return nil
}

// validateAttributeName applies DynamoDB's rule for key attribute names (1 to
// 255 bytes of UTF-8), refuses control characters, and keeps the name apart
// from those a record uses.
func validateAttributeName(field, name string) error {
	switch {
	case len(name) > 255:
		return fmt.Errorf("dynamolease: %s is %d bytes, limit 255", field, len(name))
	case !utf8.ValidString(name):
		return fmt.Errorf("dynamolease: %s %q is not valid UTF-8", field, name)
	case strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return fmt.Errorf("dynamolease: %s %q holds a character that is not printable", field, name)
	}
	for _, a := range recordAttributes {
		if name == a {
			return fmt.Errorf("dynamolease: %s %q is an attribute every record uses (reserved: %s)", field, name, strings.Join(recordAttributes, ", "))
		}
	}
	return nil
}

// Store is a lease.Store on one DynamoDB table, one item per lease. It is safe
// for concurrent use: its fields are set by New and only read afterwards.
type Store struct {
	api   API
	table string
	key   string        // partition key attribute
	ttl   string        // TTL attribute, "" for none
	slack time.Duration // TTL past the end of the lease

	// Condition expression names, built once and only read afterwards (the
	// SDK does not modify its input).
	createNames map[string]string // #k: key attribute
	updateNames map[string]string // #v: version attribute
}

var _ lease.Store = (*Store)(nil)

// Condition expressions. create succeeds only where no item exists; update
// only where the stored version is the expected one.
const (
	condCreate = "attribute_not_exists(#k)"
	condUpdate = "#v = :v"
)

// New returns a Store that keeps leases in the table cfg names, through api
// (usually a *dynamodb.Client). It checks cfg but makes no request: a missing
// table shows on the first Get or Put as an error matching ErrTableNotFound.
func New(api API, cfg Config) (*Store, error) {
	if api == nil {
		return nil, errors.New("dynamolease: nil API")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Store{
		api:         api,
		table:       cfg.Table,
		key:         cfg.KeyAttribute,
		ttl:         cfg.TTLAttribute,
		slack:       cfg.TTLSlack,
		createNames: map[string]string{"#k": cfg.KeyAttribute},
		updateNames: map[string]string{"#v": attrVersion},
	}, nil
}

// Get implements lease.Store with one strongly consistent GetItem. A stored
// item that is not a valid record gives an error matching
// lease.ErrInvalidRecord (a *lease.RecordError naming the field).
func (s *Store) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	return s.get(ctx, name, true)
}

// GetStale implements lease.StaleGetter with one eventually consistent
// GetItem: half the read units of Get.
func (s *Store) GetStale(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	return s.get(ctx, name, false)
}

func (s *Store) get(ctx context.Context, name string, consistent bool) (lease.Record, lease.Version, error) {
	if err := lease.CheckGet(ctx, name); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.table,
		Key:            map[string]types.AttributeValue{s.key: &types.AttributeValueMemberS{Value: name}},
		ConsistentRead: &consistent,
	})
	if err != nil {
		return lease.Record{}, lease.NoVersion, s.fail(ctx, "get", name, err)
	}
	if len(out.Item) == 0 {
		return lease.Record{}, lease.NoVersion, lease.NotFound(name)
	}
	rec, ver, err := decode(name, out.Item)
	if err != nil {
		return lease.Record{}, lease.NoVersion, fmt.Errorf("get: %w", err)
	}
	return rec, ver, nil
}

// Put implements lease.Store with one conditional PutItem. A conflict is a
// *lease.ConflictError carrying the stored record (Found false when there is
// none), which DynamoDB returns with the failed condition. When the stored
// item is not a valid record, or a create conflicts and the server returns no
// item, the conflict is a plain error matching lease.ErrConflict.
func (s *Store) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if err := lease.CheckPut(ctx, name, rec); err != nil {
		return lease.NoVersion, err
	}
	ver := newVersion()
	item, err := s.encode(name, rec, ver, time.Now())
	if err != nil {
		return lease.NoVersion, fmt.Errorf("put: %w", err)
	}
	in := &dynamodb.PutItemInput{
		TableName:                           &s.table,
		Item:                                item,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if expect == lease.NoVersion {
		cond := condCreate
		in.ConditionExpression = &cond
		in.ExpressionAttributeNames = s.createNames
	} else {
		cond := condUpdate
		in.ConditionExpression = &cond
		in.ExpressionAttributeNames = s.updateNames
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: string(expect)}}
	}
	_, err = s.api.PutItem(ctx, in)
	if err == nil {
		return ver, nil
	}
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return s.conflict(name, expect, ver, failed.Item)
	}
	return lease.NoVersion, s.fail(ctx, "put", name, err)
}

// conflict turns the item DynamoDB returned with a failed condition (ALL_OLD)
// into the error Put returns.
//
// The SDK retries a PutItem whose response was lost. If the first attempt
// applied, the retry fails its condition against the very item it wrote, and
// the version in that item is ver, which this call minted: then the write
// succeeded and Put says so.
func (s *Store) conflict(name string, expect, ver lease.Version, item map[string]types.AttributeValue) (lease.Version, error) {
	if len(item) == 0 {
		if expect == lease.NoVersion {
			// attribute_not_exists failed, so an item exists, but the server
			// did not return it (DynamoDB does; an emulator might not).
			return lease.NoVersion, lease.Conflict(name)
		}
		// DynamoDB returns the item whenever one exists (DynamoDB Local
		// 11.1.0 too), so none returned means none is stored.
		return lease.NoVersion, &lease.ConflictError{Name: name}
	}
	cur, curVer, err := decode(name, item)
	if err != nil {
		// Not a conflict a caller can act on from the error alone: it
		// learns the detail from Get. The RecordError is not wrapped so that
		// the conflict does not look like a rejection of the caller's record.
		return lease.NoVersion, fmt.Errorf("put lease %q: %w; the stored item is not a valid record: %v", name, lease.ErrConflict, err)
	}
	if curVer == ver {
		return ver, nil
	}
	return lease.NoVersion, &lease.ConflictError{Name: name, Current: cur, Version: curVer, Found: true}
}

// fail wraps an error from the SDK with the operation and the lease name, and
// makes sure a cancelled or expired ctx shows in it. Errors that retrying
// cannot cure are marked lease.Permanent and name the table and the error
// code.
func (s *Store) fail(ctx context.Context, op, name string, err error) error {
	var missing *types.ResourceNotFoundException
	if errors.As(err, &missing) {
		return lease.Permanent(fmt.Errorf("%s lease %q: table %q: %w (%w)", op, name, s.table, ErrTableNotFound, err))
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%s lease %q: %w (%w)", op, name, cerr, err)
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch code := api.ErrorCode(); code {
		case "ValidationException":
			// Most often a key that does not fit the table, which DynamoDB
			// words as "One of the required keys was not given a value" or
			// "The provided key element does not match the schema".
			return lease.Permanent(fmt.Errorf("%s lease %q: table %q: %s: %w (is the partition key named %q, of type S, with no sort key?)", op, name, s.table, code, err, s.key))
		case "AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException", "MissingAuthenticationTokenException":
			return lease.Permanent(fmt.Errorf("%s lease %q: table %q: %s: %w (see the IAM policy in the package doc)", op, name, s.table, code, err))
		}
	}
	return fmt.Errorf("%s lease %q: %w", op, name, err)
}

// newVersion mints a version: 130 random bits, as 26 base32 characters.
// Versions are not derived from the record (the same record written twice
// must get two versions) nor counted (a counter would start again if the item
// were deleted), so one is never handed out twice for a lease.
func newVersion() lease.Version { return lease.Version(rand.Text()) }
