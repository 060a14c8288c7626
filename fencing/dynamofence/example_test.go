package dynamofence_test

import (
	"context"
	"errors"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/fencing/dynamofence"
)

// The leader writes the orders table through a Client; a write from a term
// that is over is refused by DynamoDB.
func Example() {
	awsCfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	orders, err := dynamofence.New(dynamodb.NewFromConfig(awsCfg), dynamofence.Config{})
	if err != nil {
		log.Fatal(err)
	}
	_ = tenure.Callbacks{
		OnElected: func(ctx context.Context, term tenure.Term) {
			// ctx carries term.Fence(); orders.PutItem presents it.
			_, err := orders.PutItem(ctx, &dynamodb.PutItemInput{
				TableName: aws.String("orders"),
				Item: map[string]types.AttributeValue{
					"pk":     &types.AttributeValueMemberS{Value: "order-1"},
					"status": &types.AttributeValueMemberS{Value: "shipped"},
				},
				// The caller's own condition composes with the fence.
				ConditionExpression: aws.String("attribute_exists(pk)"),
			})
			var own *types.ConditionalCheckFailedException
			switch {
			case errors.Is(err, fencing.ErrStaleToken):
				return // a newer leader has written: this term is over
			case errors.As(err, &own):
				log.Print("no such order") // our condition, not the fence
			case err != nil:
				log.Print(err)
			}
		},
	}
}
