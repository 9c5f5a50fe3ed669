package input

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/kpl"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

func TestIntegrationAggregatedRecordsAreSplit(t *testing.T) {
	t.Parallel()
	emu := testenv.SharedKinesisMock(t)
	red := testenv.NewRedis(t)
	const stream = "kpl"
	emu.MustCreateStream(t, stream, 1)
	for i := range 10 {
		var subs []kpl.Record
		for j := range 5 {
			subs = append(subs, kpl.Record{PartitionKey: fmt.Sprintf("u%d", j), Data: []byte(fmt.Sprintf("agg%d-%d", i, j))})
		}
		_, err := emu.Client().PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("a"), Data: kpl.Encode(subs)})
		require.NoError(t, err)
	}

	type meta struct{ data, key, sub, seq string }
	var got []meta
	done := make(chan struct{})
	rs := startStream(t, inputYAML(stream, emu.Endpoint, red.URL(), "g", ""), func(_ context.Context, b service.MessageBatch) error {
		for _, m := range b {
			d, _ := m.AsBytes()
			key, _ := m.MetaGet(MetaPartitionKey)
			sub, _ := m.MetaGet(MetaSubSequence)
			seq, _ := m.MetaGet(MetaSequenceNumber)
			got = append(got, meta{string(d), key, sub, seq})
		}
		if len(got) == 50 {
			close(done)
		}
		return nil
	})
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("got %d of 50 user records", len(got))
	}
	rs.stop(t)
	for i, m := range got {
		assert.Equal(t, fmt.Sprintf("agg%d-%d", i/5, i%5), m.data)
		assert.Equal(t, fmt.Sprintf("u%d", i%5), m.key, "the user record's own partition key")
		assert.Equal(t, fmt.Sprint(i%5), m.sub)
		assert.Equal(t, got[i-i%5].seq, m.seq, "sub-records share their aggregate's sequence number")
		if i >= 5 {
			assert.NotEqual(t, got[i-5].seq, m.seq, "each aggregate has its own sequence number")
		}
	}
}
