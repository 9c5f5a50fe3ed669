package coordinator

import (
	"crypto/md5"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/kpl"
)

// lowerHalf is the hash key range of the first child of a split at 2^127.
var lowerHalf = &types.HashKeyRange{
	StartingHashKey: aws.String("0"),
	EndingHashKey:   aws.String(new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 127), big.NewInt(1)).String()),
}

// keysByHalf returns n partition keys whose MD5 lies in the lower half of
// the hash key space and n in the upper half.
func keysByHalf(n int) (lower, upper []string) {
	for i := 0; len(lower) < n || len(upper) < n; i++ {
		k := fmt.Sprintf("key-%d", i)
		if md5.Sum([]byte(k))[0] < 0x80 {
			if len(lower) < n {
				lower = append(lower, k)
			}
		} else if len(upper) < n {
			upper = append(upper, k)
		}
	}
	return lower, upper
}

// An aggregate with a user record whose hash key lies outside the shard's
// range is a stray copy (KCL's rule): all of it is dropped and its user
// records counted; aggregates wholly within the range are delivered. With
// the range unknown nothing is dropped.
func TestStrayAggregatesOutsideTheShardsRangeAreDropped(t *testing.T) {
	t.Parallel()
	lower, upper := keysByHalf(3)
	// Aggregates 1 and 3 hold lower-half keys only; aggregate 2 mixes both
	// halves, as one written before the producer saw the split at 2^127.
	memberKey := func(i, j int) string {
		if i == 2 && j == 1 {
			return upper[j]
		}
		return lower[j]
	}
	for _, tc := range []struct {
		name      string
		hashRange *types.HashKeyRange
		want      []string
		dropped   int64
	}{
		{"range known", lowerHalf, []string{"1.0", "1.1", "1.2", "3.0", "3.1", "3.2"}, 3},
		{"range unknown", nil, []string{"1.0", "1.1", "1.2", "2.0", "2.1", "2.2", "3.0", "3.1", "3.2"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := consumertest.NewKinesis()
			const shard = "shardId-000000000000"
			api.Add(shard, &consumertest.KinesisShard{Records: 3, Aggregate: 3, HashRange: tc.hashRange, MemberKey: memberKey})
			cfg := testConfig()
			cfg.Deaggregate = true
			cfg.Streams = []string{"stray-" + map[bool]string{true: "known", false: "unknown"}[tc.hashRange != nil]}
			c := startConsumerWithMetrics(t, cfg, api, consumertest.NewStore(time.Second), consumertest.Metrics(t))
			var got []string
			for len(got) < len(tc.want) {
				select {
				case b := <-c.Batches():
					for _, r := range b.Records {
						got = append(got, string(r.Data)[len(shard)+1:])
					}
					b.Ack(nil)
				case <-time.After(10 * time.Second):
					t.Fatalf("only %v delivered", got)
				}
			}
			// Nothing more comes: the dropped records are not delivered late.
			select {
			case b := <-c.Batches():
				t.Fatalf("unexpected batch %v", b.Records)
			case <-time.After(300 * time.Millisecond):
			}
			assert.Equal(t, tc.want, got)
			n, _ := consumertest.Gauges.Get(consumer.MetricRecordsDropped + "{" + cfg.Streams[0] + "," + consumer.DropOutsideHashRange + "}")
			assert.Equal(t, tc.dropped, n, "every user record of a dropped aggregate is counted")
		})
	}
}

func TestUserHashKey(t *testing.T) {
	t.Parallel()
	top := new(big.Int).Lsh(big.NewInt(1), 127)
	h := consumer.HashRangeOf(lowerHalf)
	require.NotNil(t, h)
	k, ok := consumer.UserHashKey(kpl.Record{PartitionKey: "ignored", ExplicitHashKey: top.String()})
	require.True(t, ok)
	assert.False(t, h.Holds(k), "2^127 is the first key of the upper half")
	k, ok = consumer.UserHashKey(kpl.Record{ExplicitHashKey: new(big.Int).Sub(top, big.NewInt(1)).String()})
	require.True(t, ok)
	assert.True(t, h.Holds(k), "2^127-1 is the last key of the lower half")
	_, ok = consumer.UserHashKey(kpl.Record{ExplicitHashKey: "not a number"})
	assert.False(t, ok, "an unreadable explicit hash key is kept, not dropped")
	assert.Nil(t, consumer.HashRangeOf(&types.HashKeyRange{StartingHashKey: aws.String("x"), EndingHashKey: aws.String("1")}))
}
