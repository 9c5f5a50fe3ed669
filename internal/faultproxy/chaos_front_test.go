package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/producer/producertest"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

func frontClient(f *Front) *kinesis.Client {
	return testenv.KinesisClient(f.URL, func(o *kinesis.Options) { o.Retryer = aws.NopRetryer{} })
}

func iterator(t *testing.T, c *kinesis.Client, stream, shard string) *string {
	t.Helper()
	out, err := c.GetShardIterator(t.Context(), &kinesis.GetShardIteratorInput{
		StreamName: aws.String(stream), ShardId: aws.String(shard), ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
	})
	require.NoError(t, err)
	return out.ShardIterator
}

func TestIntegrationFront(t *testing.T) {
	emu := testenv.NewKinesalite(t)
	const stream, other = "front", "front-other"
	emu.MustCreateStream(t, stream, 1)
	emu.MustCreateStream(t, other, 1)
	f, err := StartFront(emu.Endpoint, "127.0.0.1:0", 7)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	c := frontClient(f)
	ctx := t.Context()
	_, err = c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: putEntries(20, "seed")})
	require.NoError(t, err)
	shards, err := c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	require.NoError(t, err)
	shard := aws.ToString(shards.Shards[0].ShardId)

	// Time stands still, so "within one second" does not depend on the
	// machine's speed.
	frozen := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.SetClock(func() time.Time { return frozen })

	t.Run("the sixth GetRecords of a shard within a second is throttled like the service", func(t *testing.T) {
		f.SetLimits(Limits{Reads: true})
		defer f.ClearAll()
		it := iterator(t, c, stream, shard)
		for i := range ShardReadsPerSecond {
			_, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it})
			require.NoError(t, err, "call %d is within the limit", i+1)
		}
		_, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it})
		require.Error(t, err)
		assert.Equal(t, kinesisx.CodeProvisionedThroughputExceeded, kinesisx.ErrorCode(err))
		assert.True(t, kinesisx.IsThrottle(err))
		assert.Contains(t, err.Error(), shard)
		assert.Equal(t, 1, f.FrontStats().ReadsThrottled)

		frozen = frozen.Add(time.Second)
		_, err = c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it})
		assert.NoError(t, err, "a second later the shard can be read again")
	})

	t.Run("shards of the same id in two streams each have their own limits", func(t *testing.T) {
		f.SetLimits(Limits{Reads: true, Writes: true})
		defer f.ClearAll()
		frozen = frozen.Add(time.Minute)
		throttled := f.FrontStats().ReadsThrottled
		for _, name := range []string{stream, other} {
			it := iterator(t, c, name, shard)
			for i := range ShardReadsPerSecond {
				_, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it})
				require.NoError(t, err, "call %d on %s is within its shard's limit", i+1, name)
			}
			out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(name), Records: putEntries(500, "own-"+name)})
			require.NoError(t, err)
			assert.Zero(t, aws.ToInt32(out.FailedRecordCount), "500 records on %s are within its shard's 1,000/s", name)
			out, err = c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(name), Records: putEntries(500, "own2-"+name)})
			require.NoError(t, err)
			assert.Zero(t, aws.ToInt32(out.FailedRecordCount), "1,000 records on %s are within its shard's 1,000/s", name)
		}
		assert.Equal(t, throttled, f.FrontStats().ReadsThrottled)
	})

	t.Run("PutRecords entries over 1,000 records/s of a shard are refused alone and not written", func(t *testing.T) {
		f.SetLimits(Limits{Writes: true})
		defer f.ClearAll()
		frozen = frozen.Add(time.Minute)
		before := len(readAll(t, emu, stream))
		accepted, refused := 0, 0
		for round := range 3 { // 1,200 records in one frozen second
			out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: putEntries(400, fmt.Sprint("w", round))})
			require.NoError(t, err)
			for _, r := range out.Records {
				if r.ErrorCode != nil {
					refused++
					assert.Equal(t, kinesisx.CodeProvisionedThroughputExceeded, *r.ErrorCode)
					assert.Contains(t, aws.ToString(r.ErrorMessage), shard)
				} else {
					accepted++
				}
			}
		}
		assert.Equal(t, ShardRecordsPerSecond, accepted)
		assert.Equal(t, 200, refused)
		assert.Len(t, readAll(t, emu, stream), before+accepted, "refused entries were never written")
	})

	t.Run("1 MiB/s of a shard is enforced per record", func(t *testing.T) {
		f.SetLimits(Limits{Writes: true})
		defer f.ClearAll()
		frozen = frozen.Add(time.Minute)
		big := make([]types.PutRecordsRequestEntry, 5)
		for i := range big {
			big[i] = types.PutRecordsRequestEntry{Data: make([]byte, 300<<10), PartitionKey: aws.String("k")}
		}
		out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: big})
		require.NoError(t, err)
		assert.Equal(t, int32(2), aws.ToInt32(out.FailedRecordCount), "three 300 KiB records fit in 1 MiB, the other two do not")
	})

	t.Run("ExpiredIteratorException", func(t *testing.T) {
		f.SetReadFaults(ReadFaults{ExpiredIteratorRate: 1})
		defer f.ClearAll()
		_, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iterator(t, c, stream, shard)})
		require.Error(t, err)
		assert.True(t, kinesisx.IsExpiredIterator(err), "%v", err)
	})

	t.Run("a reset in the middle of the answer is a retryable error", func(t *testing.T) {
		f.SetReadFaults(ReadFaults{ResetRate: 1})
		defer f.ClearAll()
		_, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iterator(t, c, stream, shard)})
		require.Error(t, err)
		assert.True(t, kinesisx.Retryable(err), "%v", err)
		assert.Equal(t, 1, f.FrontStats().ResetsMidAnswer)
	})

	t.Run("a hung GetRecords lasts until the client gives up", func(t *testing.T) {
		f.SetReadFaults(ReadFaults{HangRate: 1})
		defer f.ClearAll()
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := c.GetRecords(cctx, &kinesis.GetRecordsInput{ShardIterator: iterator(t, c, stream, shard)})
		require.Error(t, err)
		assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
		assert.Equal(t, 1, f.FrontStats().Hangs)
	})

	t.Run("proxy rules still apply through the front", func(t *testing.T) {
		f.Set("GetRecords", Rule{ThrottleRate: 1})
		defer f.ClearAll()
		_, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iterator(t, c, stream, shard)})
		assert.True(t, kinesisx.IsThrottle(err), "%v", err)
	})
}

func readAll(t *testing.T, emu *testenv.Kinesis, stream string) []producertest.Record {
	t.Helper()
	got, err := producertest.ReadAll(t.Context(), emu.Client(), stream)
	require.NoError(t, err)
	return got
}
