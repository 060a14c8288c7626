package dynamolease_test

import (
	"context"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tenure-go/tenure/lease/dynamolease"
)

// A Store on a table made once at deployment. It needs AWS credentials and a
// region from the environment, so it is compiled but not run.
func Example() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	api := dynamodb.NewFromConfig(awsCfg)

	// Usually done once by an operator (see docs/dynamodb.md); harmless
	// when the table exists.
	if err := dynamolease.CreateTable(ctx, api, "tenure-leases", dynamolease.TableOptions{}); err != nil {
		log.Fatal(err)
	}
	store, err := dynamolease.New(api, dynamolease.Config{Table: "tenure-leases"})
	if err != nil {
		log.Fatal(err)
	}
	_ = store // hand it to a tenure.Candidate
}
