package dynamolease

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tenure-go/tenure/lease"
)

// AdminAPI is what List and Delete call beyond API, for operators' tools
// (tenure list, tenure gc, tenure release --force); *dynamodb.Client has
// it. The protocol never calls it: IAM for a candidate needs neither
// dynamodb:Scan nor dynamodb:DeleteItem.
type AdminAPI interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

var (
	_ lease.Lister  = (*Store)(nil)
	_ lease.Deleter = (*Store)(nil)
)

func (s *Store) admin() (AdminAPI, error) {
	a, ok := s.api.(AdminAPI)
	if !ok {
		return nil, errors.New("dynamolease: the API given to New cannot Scan and DeleteItem (a *dynamodb.Client can)")
	}
	return a, nil
}

// List implements lease.Lister with a Scan of the table's keys: it reads
// (and bills) every item of the table, however few match prefix. Items
// whose key is not a lease name are left out.
func (s *Store) List(ctx context.Context, prefix string, fn func(name string) error) error {
	a, err := s.admin()
	if err != nil {
		return err
	}
	proj := "#k"
	in := &dynamodb.ScanInput{TableName: &s.table, ProjectionExpression: &proj, ExpressionAttributeNames: s.createNames}
	for {
		out, err := a.Scan(ctx, in)
		if err != nil {
			return s.fail(ctx, "list", prefix+"*", err)
		}
		for _, item := range out.Items {
			k, ok := item[s.key].(*types.AttributeValueMemberS)
			if !ok || !strings.HasPrefix(k.Value, prefix) || lease.ValidateName(k.Value) != nil {
				continue
			}
			if err := fn(k.Value); err != nil {
				return err
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// Delete implements lease.Deleter with one conditional DeleteItem.
func (s *Store) Delete(ctx context.Context, name string, expect lease.Version) error {
	if err := lease.CheckDelete(ctx, name); err != nil {
		return err
	}
	a, err := s.admin()
	if err != nil {
		return err
	}
	in := &dynamodb.DeleteItemInput{
		TableName:                           &s.table,
		Key:                                 map[string]types.AttributeValue{s.key: &types.AttributeValueMemberS{Value: name}},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	cond := "attribute_exists(#k)"
	in.ExpressionAttributeNames = s.createNames
	if expect != lease.AnyVersion {
		cond = condUpdate
		in.ExpressionAttributeNames = s.updateNames
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: string(expect)}}
	}
	in.ConditionExpression = &cond
	_, err = a.DeleteItem(ctx, in)
	var failed *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &failed) && len(failed.Item) == 0:
		return lease.NotFound(name)
	case errors.As(err, &failed):
		cur, ver, derr := decode(name, failed.Item)
		if derr != nil {
			return fmt.Errorf("delete lease %q: %w; the stored item is not a valid record: %v", name, lease.ErrConflict, derr)
		}
		return &lease.ConflictError{Name: name, Current: cur, Version: ver, Found: true}
	}
	return s.fail(ctx, "delete", name, err)
}
