package source

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// slowForLargeLimits is a Kinesis whose GetRecords answer starts only
// after 6 s when asked for more than fast records (a loaded emulator
// gathering a large answer), and at once for fewer.
type slowForLargeLimits struct {
	consumer.KinesisAPI
	fast   int32
	mu     sync.Mutex
	limits []int32
}

func (k *slowForLargeLimits) GetShardIterator(context.Context, *kinesis.GetShardIteratorInput, ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String("it")}, nil
}

func (k *slowForLargeLimits) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	limit := aws.ToInt32(in.Limit)
	k.mu.Lock()
	k.limits = append(k.limits, limit)
	k.mu.Unlock()
	if limit > k.fast {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(6 * time.Second):
		}
	}
	return &kinesis.GetRecordsOutput{
		Records:           []types.Record{{Data: []byte("x"), PartitionKey: aws.String("k"), SequenceNumber: aws.String("5")}},
		NextShardIterator: aws.String("it"), MillisBehindLatest: aws.Int64(1000),
	}, nil
}

func (k *slowForLargeLimits) asked() []int32 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]int32(nil), k.limits...)
}

// Guards the livelock of a large limit: a GetRecords whose answer takes
// longer than the stall bound to start was given up and sent again at the
// same limit forever, so a shard never read on (kinesalite under load).
// After a stall the next call asks for half as many records, down to a
// floor, and grows back after answers.
func TestStalledGetRecordsAsksForFewerRecordsNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &slowForLargeLimits{fast: 1000}
		s := newPollingSource(Params{
			API: api, Stream: "s", Shard: "shardId-000000000000",
			From:   Start{IterType: "TRIM_HORIZON"},
			Config: &consumer.Config{Limit: 10000, PollInterval: 200 * time.Millisecond, IdlePollInterval: time.Second, Backoff: kinesisx.Backoff{InitialInterval: 100 * time.Millisecond, MaxInterval: time.Second}},
			Log:    service.MockResources().Logger(), Room: noRoom{},
			OnExpired: func() {}, OnAnswer: func(time.Time) {},
		})
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		b, err := s.Next(ctx)
		require.NoError(t, err, "the shard never read on; limits asked: %v", api.asked())
		require.Len(t, b.Records, 1)
		limits := api.asked()
		t.Logf("limits asked: %v", limits)
		assert.Equal(t, int32(10000), limits[0])
		for i := 1; i < len(limits); i++ {
			assert.Equal(t, limits[i-1]/2, limits[i], "a stalled call's next one asks for half")
		}
		// Answers at the small limit let it grow back towards `limit`.
		for range 2 * growAfter {
			_, err := s.Next(ctx)
			require.NoError(t, err)
		}
		later := api.asked()[len(limits):]
		assert.Greater(t, slices.Max(later), limits[len(limits)-1], "the limit grows back after answers: %v", later)
	})
}
