package dynamofence

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/awskit"
)

// API is the part of the DynamoDB client a Client uses. *dynamodb.Client
// implements it.
type API interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// Defaults for the Config fields left empty.
const (
	// defaultTokenAttribute holds the fence's token, type N.
	defaultTokenAttribute = "fence_token"
	// defaultLeaseAttribute holds the fence's lease name, type S.
	defaultLeaseAttribute = "fence_lease"
	// defaultTombstoneAttribute marks a tombstone, type BOOL (true).
	defaultTombstoneAttribute = "fence_tombstone"
)

// Config names the attributes a Client adds to the caller's items. They must
// differ from each other and from every attribute the caller's items use.
type Config struct {
	// TokenAttribute holds the token of the last write (N). Default "fence_token".
	TokenAttribute string
	// LeaseAttribute holds the lease of the last write (S). Default "fence_lease".
	LeaseAttribute string
	// TombstoneAttribute marks an item Tombstone wrote (BOOL true). Default "fence_tombstone".
	TombstoneAttribute string
}

func (c *Config) validate() error {
	for _, f := range []struct {
		field string
		p     *string
		def   string
	}{
		{"TokenAttribute", &c.TokenAttribute, defaultTokenAttribute},
		{"LeaseAttribute", &c.LeaseAttribute, defaultLeaseAttribute},
		{"TombstoneAttribute", &c.TombstoneAttribute, defaultTombstoneAttribute},
	} {
		if *f.p == "" {
			*f.p = f.def
		}
		if len(*f.p) > 255 || !utf8.ValidString(*f.p) {
			return fmt.Errorf("dynamofence: Config.%s %q: want 1 to 255 bytes of UTF-8", f.field, *f.p)
		}
	}
	if c.TokenAttribute == c.LeaseAttribute || c.TokenAttribute == c.TombstoneAttribute || c.LeaseAttribute == c.TombstoneAttribute {
		return fmt.Errorf("dynamofence: Config attributes %q, %q and %q must differ", c.TokenAttribute, c.LeaseAttribute, c.TombstoneAttribute)
	}
	return nil
}

// Client sends fenced writes to the caller's DynamoDB tables. Its PutItem,
// UpdateItem, DeleteItem and TransactWriteItems have the signatures of
// *dynamodb.Client's and add the fence carried by ctx (fencing.FromContext)
// to each write; Tombstone is a DeleteItem that leaves the fence behind. It is
// safe for concurrent use and never modifies its inputs.
type Client struct {
	api              API
	tok, lease, tomb string // attribute names
}

// New returns a Client that writes through api (usually a *dynamodb.Client)
// with the attribute names cfg gives. It makes no request.
func New(api API, cfg Config) (*Client, error) {
	if api == nil {
		return nil, errors.New("dynamofence: nil API")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Client{api: api, tok: cfg.TokenAttribute, lease: cfg.LeaseAttribute, tomb: cfg.TombstoneAttribute}, nil
}

// fence returns the fence ctx carries, checked.
func fence(ctx context.Context, op string) (fencing.Fence, error) {
	f, ok := fencing.FromContext(ctx)
	if !ok {
		return f, fmt.Errorf("dynamofence: %s: %w", op, fencing.ErrNoFence)
	}
	if err := f.Validate(); err != nil {
		return f, fmt.Errorf("dynamofence: %s: %w", op, err)
	}
	if err := fencing.Err(ctx); err != nil {
		return f, fmt.Errorf("dynamofence: %s: %v: term over, not sent: %w", op, f, err)
	}
	return f, nil
}

// fenceExpr holds the placeholders of a fence and its condition.
type fenceExpr struct {
	cond               string // the item has no fence, or one that admits ours
	tok, lease         string // attribute name placeholders
	tokVal, leaseValue string // attribute value placeholders
}

// condition adds the fence's placeholders to p: the item has no fence yet,
// or one of the same lease with a token no higher.
func (c *Client) condition(p *placeholders, f fencing.Fence) fenceExpr {
	e := fenceExpr{
		tok:        p.name("tenure_fence_token", c.tok),
		lease:      p.name("tenure_fence_lease", c.lease),
		tokVal:     p.value("tenure_fence_token", &types.AttributeValueMemberN{Value: f.Token.String()}),
		leaseValue: p.value("tenure_fence_lease", &types.AttributeValueMemberS{Value: f.Lease}),
	}
	e.cond = fmt.Sprintf("attribute_not_exists(%s) OR (%s = %s AND %s <= %s)", e.tok, e.lease, e.leaseValue, e.tok, e.tokVal)
	return e
}

// maps returns p's maps, or nil for an empty one (DynamoDB refuses empty
// maps).
func (p *placeholders) maps() (map[string]string, map[string]types.AttributeValue) {
	names, values := p.names, p.values
	if len(names) == 0 {
		names = nil
	}
	if len(values) == 0 {
		values = nil
	}
	return names, values
}

// fencedItem returns a copy of item with the fence added, refusing an item
// that sets the fence's attributes itself.
func (c *Client) fencedItem(item map[string]types.AttributeValue, f fencing.Fence, tombstone bool) (map[string]types.AttributeValue, error) {
	for _, a := range []string{c.tok, c.lease, c.tomb} {
		if _, ok := item[a]; ok {
			return nil, fmt.Errorf("item sets %q, an attribute the fence owns", a)
		}
	}
	out := make(map[string]types.AttributeValue, len(item)+3)
	maps.Copy(out, item)
	out[c.tok] = &types.AttributeValueMemberN{Value: f.Token.String()}
	out[c.lease] = &types.AttributeValueMemberS{Value: f.Lease}
	if tombstone {
		out[c.tomb] = &types.AttributeValueMemberBOOL{Value: true}
	}
	return out, nil
}

func (c *Client) fencePut(in *dynamodb.PutItemInput, f fencing.Fence) (*dynamodb.PutItemInput, error) {
	item, err := c.fencedItem(in.Item, f, false)
	if err != nil {
		return nil, err
	}
	out := *in
	out.Item = item
	p := newPlaceholders(in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	out.ConditionExpression = ptr(and(deref(in.ConditionExpression), c.condition(p, f).cond))
	out.ExpressionAttributeNames, out.ExpressionAttributeValues = p.maps()
	out.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	return &out, nil
}

func (c *Client) fenceUpdate(in *dynamodb.UpdateItemInput, f fencing.Fence) *dynamodb.UpdateItemInput {
	out := *in
	p := newPlaceholders(in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	e := c.condition(p, f)
	tomb := p.name("tenure_fence_tombstone", c.tomb)
	// Writing to a tombstone brings the item back, as an update of a
	// missing item creates it.
	set := fmt.Sprintf("%s = %s, %s = %s", e.tok, e.tokVal, e.lease, e.leaseValue)
	out.UpdateExpression = ptr(addToUpdate(deref(in.UpdateExpression), set, tomb))
	out.ConditionExpression = ptr(and(deref(in.ConditionExpression), e.cond))
	out.ExpressionAttributeNames, out.ExpressionAttributeValues = p.maps()
	out.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	return &out
}

func (c *Client) fenceDelete(in *dynamodb.DeleteItemInput, f fencing.Fence) *dynamodb.DeleteItemInput {
	out := *in
	p := newPlaceholders(in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	out.ConditionExpression = ptr(and(deref(in.ConditionExpression), c.condition(p, f).cond))
	out.ExpressionAttributeNames, out.ExpressionAttributeValues = p.maps()
	out.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	return &out
}

// PutItem is (*dynamodb.Client).PutItem with the fence ctx carries: the item
// is written only if the stored item has no fence or one of the same lease
// with a token no higher, and the written item holds the fence. The caller's
// ConditionExpression must hold too.
//
// A refusal by the fence is an error matching fencing.ErrStaleToken (a
// *fencing.StaleTokenError naming the stored token) or fencing.ErrWrongLease;
// a failure of the caller's own condition is the SDK's error, unchanged
// (*types.ConditionalCheckFailedException, with the stored item in Item). The
// item must not set the fence's attributes.
func (c *Client) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	const op = "put item"
	f, err := fence(ctx, op)
	if err != nil {
		return nil, err
	}
	fenced, err := c.fencePut(in, f)
	if err != nil {
		return nil, fmt.Errorf("dynamofence: %s in table %q: %w", op, deref(in.TableName), err)
	}
	out, err := c.api.PutItem(ctx, fenced, optFns...)
	return out, c.explain(op, deref(in.TableName), f, in.ConditionExpression, err)
}

// UpdateItem is (*dynamodb.Client).UpdateItem with the fence ctx carries, as
// PutItem describes. It sets the fence's attributes in the SET clause of the
// caller's UpdateExpression (adding one if there is none) and removes the
// tombstone mark in its REMOVE clause, so an update of a tombstone brings the
// item back, as an update of a missing item creates it. The caller's
// UpdateExpression must not touch the fence's attributes.
func (c *Client) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	const op = "update item"
	f, err := fence(ctx, op)
	if err != nil {
		return nil, err
	}
	out, err := c.api.UpdateItem(ctx, c.fenceUpdate(in, f), optFns...)
	return out, c.explain(op, deref(in.TableName), f, in.ConditionExpression, err)
}

// DeleteItem is (*dynamodb.Client).DeleteItem with the fence ctx carries:
// the item is deleted only if its fence admits ctx's, as PutItem describes.
//
// A deleted item takes its fence with it: a stale writer that comes later
// finds no fence and may create the item again. Use Tombstone where that
// matters.
func (c *Client) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	const op = "delete item"
	f, err := fence(ctx, op)
	if err != nil {
		return nil, err
	}
	out, err := c.api.DeleteItem(ctx, c.fenceDelete(in, f), optFns...)
	return out, c.explain(op, deref(in.TableName), f, in.ConditionExpression, err)
}

// Tombstone deletes an item by replacing it with a tombstone that keeps the
// fence: only the key, the fence's attributes and the tombstone mark (BOOL
// true). It is one PutItem under the same conditions as DeleteItem, and its
// output carries what that PutItem returned (ReturnValues ALL_OLD gives the
// item as it was). Unlike DeleteItem, a stale writer that comes later is still
// refused; a writer of the current or a later term replaces the tombstone
// with PutItem, or brings it back with UpdateItem.
//
// Readers must treat an item for which IsTombstone reports true as absent,
// and conditions that test for existence must test the mark too, for
// example "attribute_exists(pk) AND attribute_not_exists(fence_tombstone)".
// Tombstones cost storage until removed; removing one (with a plain
// DeleteItem, or DynamoDB TTL) is safe once no writer of an older term can
// still be running, for example a day after the lease last changed hands.
func (c *Client) Tombstone(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	const op = "tombstone item"
	f, err := fence(ctx, op)
	if err != nil {
		return nil, err
	}
	put, err := c.fencePut(&dynamodb.PutItemInput{
		TableName:                   in.TableName,
		Item:                        in.Key,
		ConditionExpression:         in.ConditionExpression,
		ExpressionAttributeNames:    in.ExpressionAttributeNames,
		ExpressionAttributeValues:   in.ExpressionAttributeValues,
		ReturnValues:                in.ReturnValues,
		ReturnConsumedCapacity:      in.ReturnConsumedCapacity,
		ReturnItemCollectionMetrics: in.ReturnItemCollectionMetrics,
	}, f)
	if err != nil {
		return nil, fmt.Errorf("dynamofence: %s in table %q: key: %w", op, deref(in.TableName), err)
	}
	put.Item[c.tomb] = &types.AttributeValueMemberBOOL{Value: true}
	out, err := c.api.PutItem(ctx, put, optFns...)
	if err != nil {
		return nil, c.explain(op, deref(in.TableName), f, in.ConditionExpression, err)
	}
	return &dynamodb.DeleteItemOutput{
		Attributes:            out.Attributes,
		ConsumedCapacity:      out.ConsumedCapacity,
		ItemCollectionMetrics: out.ItemCollectionMetrics,
		ResultMetadata:        out.ResultMetadata,
	}, nil
}

// IsTombstone reports whether item is a tombstone that Tombstone wrote.
func (c *Client) IsTombstone(item map[string]types.AttributeValue) bool {
	b, ok := item[c.tomb].(*types.AttributeValueMemberBOOL)
	return ok && b.Value
}

// FenceOf returns the fence stored in item: the zero Fence if it has none,
// and an error if the fence's attributes are there but malformed (a token
// that is not a number from 1 to 2^64-1, a lease that is not a string, one
// without the other).
func (c *Client) FenceOf(item map[string]types.AttributeValue) (fencing.Fence, error) {
	tv, hasTok := item[c.tok]
	lv, hasLease := item[c.lease]
	if !hasTok && !hasLease {
		return fencing.Fence{}, nil
	}
	n, ok := tv.(*types.AttributeValueMemberN)
	if !ok {
		return fencing.Fence{}, fmt.Errorf("dynamofence: attribute %q is %s, want a number", c.tok, awskit.AttributeType(tv))
	}
	s, ok := lv.(*types.AttributeValueMemberS)
	if !ok {
		return fencing.Fence{}, fmt.Errorf("dynamofence: attribute %q is %s, want a string", c.lease, awskit.AttributeType(lv))
	}
	tok, err := fencing.ParseToken(n.Value)
	if err != nil {
		return fencing.Fence{}, fmt.Errorf("dynamofence: attribute %q: %w", c.tok, err)
	}
	return fencing.Fence{Lease: s.Value, Token: tok}, nil
}

// explain turns a failed condition that the fence caused into a fencing
// error. The stored item comes with the failure (ALL_OLD), so the fence
// condition can be evaluated again here: if it admits the write, the caller's
// own condition failed, and err is returned unchanged. If the item is absent
// the fence admitted the write, unless the caller had no condition, in which
// case the server did not send the item and all that is known is that the
// fence refused.
func (c *Client) explain(op, table string, f fencing.Fence, userCond *string, err error) error {
	var failed *types.ConditionalCheckFailedException
	if err == nil || !errors.As(err, &failed) {
		return err
	}
	if ferr := c.refusal(f, failed.Item, strings.TrimSpace(deref(userCond)) != ""); ferr != nil {
		return fmt.Errorf("dynamofence: %s in table %q: %w", op, table, ferr)
	}
	return err
}

// refusal returns the fencing error that explains a failed condition on an
// item stored as old, or nil if the fence admitted f.
func (c *Client) refusal(f fencing.Fence, old map[string]types.AttributeValue, userCond bool) error {
	if old == nil {
		if userCond {
			return nil
		}
		return &fencing.StaleTokenError{Lease: f.Lease, Presented: f.Token}
	}
	cur, err := c.FenceOf(old)
	if err != nil {
		return fmt.Errorf("the stored item's fence refused the write: %w", err)
	}
	return fencing.Check(cur, f)
}

func ptr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
