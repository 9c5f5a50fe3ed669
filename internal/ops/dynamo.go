package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/failsafe-go/failsafe-go"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// Reading a foreign checkpoint table from DynamoDB, for `checkpoints import`.

// dynamoAPI is the part of the DynamoDB client the import uses.
type dynamoAPI interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// item is one DynamoDB item.
type item = map[string]ddbtypes.AttributeValue

// scanTable reads every item of a table, page by page; each page is retried
// through the one classifier (DynamoDB throttling codes are among the SDK's
// own), so a throttled page never ends in a partial read.
func scanTable(ctx context.Context, api dynamoAPI, table string) ([]item, error) {
	retry := failsafe.With(kinesisx.RetryBuilder[*dynamodb.ScanOutput](operatorBackoff).Build()).WithContext(ctx)
	pages := dynamodb.NewScanPaginator(api, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	var items []item
	for pages.HasMorePages() {
		out, err := retry.Get(func() (*dynamodb.ScanOutput, error) { return pages.NextPage(ctx) })
		if err != nil {
			var nf *ddbtypes.ResourceNotFoundException
			if errors.As(err, &nf) {
				return nil, fmt.Errorf("flag --%s: DynamoDB table %q not found (check --%s, --%s and --%s)", flagTable, table, flagTable, flagRegion, flagDynamoEndpoint)
			}
			return nil, fmt.Errorf("scanning DynamoDB table %s: %w", table, err)
		}
		items = append(items, out.Items...)
	}
	return items, nil
}

// attrS returns a string attribute, "" when absent or of another type.
func attrS(it item, name string) string {
	if v, ok := it[name].(*ddbtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// attrN returns a number attribute as its decimal text, "" when absent.
func attrN(it item, name string) string {
	if v, ok := it[name].(*ddbtypes.AttributeValueMemberN); ok {
		return v.Value
	}
	return ""
}

// attrSS returns a string-set attribute (a single string is taken as a set
// of one).
func attrSS(it item, name string) []string {
	switch v := it[name].(type) {
	case *ddbtypes.AttributeValueMemberSS:
		return slices.Sorted(slices.Values(v.Value))
	case *ddbtypes.AttributeValueMemberS:
		return []string{v.Value}
	}
	return nil
}
