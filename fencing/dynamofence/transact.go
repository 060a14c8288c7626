package dynamofence

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TransactWriteItems is (*dynamodb.Client).TransactWriteItems with the fence
// ctx carries added to each Put, Update and Delete, as PutItem, UpdateItem
// and DeleteItem describe: the transaction applies only if every item it
// writes admits the fence. ConditionCheck items are sent unchanged.
//
// If the fence of any item refused, the error matches fencing.ErrStaleToken
// or fencing.ErrWrongLease and names the item's index; otherwise a cancelled
// transaction is the SDK's *types.TransactionCanceledException, unchanged,
// with the stored item in each CancellationReason that failed a condition.
func (c *Client) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	const op = "transact write items"
	f, err := fence(ctx, op)
	if err != nil {
		return nil, err
	}
	fenced := *in
	fenced.TransactItems = make([]types.TransactWriteItem, len(in.TransactItems))
	for i, it := range in.TransactItems {
		switch {
		case it.Put != nil:
			put, err := c.fencePut(&dynamodb.PutItemInput{
				TableName:                 it.Put.TableName,
				Item:                      it.Put.Item,
				ConditionExpression:       it.Put.ConditionExpression,
				ExpressionAttributeNames:  it.Put.ExpressionAttributeNames,
				ExpressionAttributeValues: it.Put.ExpressionAttributeValues,
			}, f)
			if err != nil {
				return nil, fmt.Errorf("dynamofence: %s: item %d (put in table %q): %w", op, i, deref(it.Put.TableName), err)
			}
			p := *it.Put
			p.Item, p.ConditionExpression = put.Item, put.ConditionExpression
			p.ExpressionAttributeNames, p.ExpressionAttributeValues = put.ExpressionAttributeNames, put.ExpressionAttributeValues
			p.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
			it.Put = &p
		case it.Update != nil:
			upd := c.fenceUpdate(&dynamodb.UpdateItemInput{
				TableName:                 it.Update.TableName,
				Key:                       it.Update.Key,
				UpdateExpression:          it.Update.UpdateExpression,
				ConditionExpression:       it.Update.ConditionExpression,
				ExpressionAttributeNames:  it.Update.ExpressionAttributeNames,
				ExpressionAttributeValues: it.Update.ExpressionAttributeValues,
			}, f)
			u := *it.Update
			u.UpdateExpression, u.ConditionExpression = upd.UpdateExpression, upd.ConditionExpression
			u.ExpressionAttributeNames, u.ExpressionAttributeValues = upd.ExpressionAttributeNames, upd.ExpressionAttributeValues
			u.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
			it.Update = &u
		case it.Delete != nil:
			del := c.fenceDelete(&dynamodb.DeleteItemInput{
				TableName:                 it.Delete.TableName,
				Key:                       it.Delete.Key,
				ConditionExpression:       it.Delete.ConditionExpression,
				ExpressionAttributeNames:  it.Delete.ExpressionAttributeNames,
				ExpressionAttributeValues: it.Delete.ExpressionAttributeValues,
			}, f)
			d := *it.Delete
			d.ConditionExpression = del.ConditionExpression
			d.ExpressionAttributeNames, d.ExpressionAttributeValues = del.ExpressionAttributeNames, del.ExpressionAttributeValues
			d.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
			it.Delete = &d
		}
		fenced.TransactItems[i] = it
	}
	out, err := c.api.TransactWriteItems(ctx, &fenced, optFns...)
	var canceled *types.TransactionCanceledException
	if err == nil || !errors.As(err, &canceled) {
		return out, err
	}
	for i, r := range canceled.CancellationReasons {
		if i >= len(in.TransactItems) || deref(r.Code) != "ConditionalCheckFailed" {
			continue
		}
		kind, table, cond := describe(in.TransactItems[i])
		if kind == "condition check" {
			continue // not fenced
		}
		if ferr := c.refusal(f, r.Item, strings.TrimSpace(deref(cond)) != ""); ferr != nil {
			return out, fmt.Errorf("dynamofence: %s: item %d (%s in table %q): %w", op, i, kind, table, ferr)
		}
	}
	return out, err
}

// describe returns what a transaction item does, its table and the caller's
// condition.
func describe(it types.TransactWriteItem) (kind, table string, cond *string) {
	switch {
	case it.Put != nil:
		return "put", deref(it.Put.TableName), it.Put.ConditionExpression
	case it.Update != nil:
		return "update", deref(it.Update.TableName), it.Update.ConditionExpression
	case it.Delete != nil:
		return "delete", deref(it.Delete.TableName), it.Delete.ConditionExpression
	case it.ConditionCheck != nil:
		return "condition check", deref(it.ConditionCheck.TableName), it.ConditionCheck.ConditionExpression
	}
	return "empty item", "", nil
}
