// Package producertest helps tests of the output check what landed in a
// stream: it reads every record of every shard back, raw.
package producertest

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// Record is a record read back with the shard it was in.
type Record struct {
	ShardID string
	types.Record
}

// ReadAll reads every record of every shard of a stream, from the trim
// horizon to the current end of each shard (the first empty GetRecords
// answer). It is for tests that finished writing before reading.
func ReadAll(ctx context.Context, c *kinesis.Client, stream string) ([]Record, error) {
	shards, err := kinesisx.ListAllShards(ctx, c, stream)
	if err != nil {
		return nil, err
	}

	var all []Record
	for _, s := range shards {
		it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
			StreamName:        aws.String(stream),
			ShardId:           s.ShardId,
			ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			return nil, fmt.Errorf("getting an iterator for shard %s: %w", aws.ToString(s.ShardId), err)
		}
		iter := it.ShardIterator
		for iter != nil {
			out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
			if err != nil {
				return nil, fmt.Errorf("reading shard %s: %w", aws.ToString(s.ShardId), err)
			}
			for _, r := range out.Records {
				all = append(all, Record{ShardID: aws.ToString(s.ShardId), Record: r})
			}
			if len(out.Records) == 0 {
				break
			}
			iter = out.NextShardIterator
		}
	}
	return all, nil
}
