package chaos

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// A fan-out subscription of a stream of the class, opened before the soak
// deletes the stream, must not be handed the records of the stream created
// again under its name. Kinesis ends a deleted stream's subscriptions;
// kinesis-mock polls by the stream's ARN, the same for the next
// incarnation, and goes on from its index, past the new stream's first
// records (seed 9's hour: an order violation the input did not cause).
// The soak's deletion ends them through the cutter. Without the cut, this
// subscription receives the new stream's records.
func TestSoakDeletionEndsTheDeletedStreamsSubscriptions(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	cutter, err := testenv.StartGentleTCPProxy(strings.TrimPrefix(emu.TLSEndpoint, "https://"))
	require.NoError(t, err)
	t.Cleanup(cutter.Close)
	ctx := t.Context()
	kc := emu.Client()
	const name = dynPrefix + "1"
	arn := emu.MustCreateStream(t, name, 1)
	put := func(data string) {
		t.Helper()
		_, err := kc.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(name), PartitionKey: aws.String("k"), Data: []byte(data)})
		require.NoError(t, err)
	}
	put("old-1")
	put("old-2")
	reg, err := kc.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(arn), ConsumerName: aws.String("soak")})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		out, err := kc.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: reg.Consumer.ConsumerARN})
		return err == nil && out.ConsumerDescription.ConsumerStatus == types.ConsumerStatusActive
	}, 30*time.Second, 100*time.Millisecond)

	// The subscription goes through the cutter, as the fan-out readers'.
	tlsCfg, err := emu.TLSConfig()
	require.NoError(t, err)
	fanOut := kinesis.New(kinesis.Options{
		Region:       testenv.Region,
		BaseEndpoint: aws.String("https://" + cutter.Addr),
		Credentials:  credentials.NewStaticCredentialsProvider(testenv.AccessKey, testenv.SecretKey, ""),
		HTTPClient:   awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.TLSClientConfig = tlsCfg }),
	})
	sub, err := fanOut.SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{
		ConsumerARN:      reg.Consumer.ConsumerARN,
		ShardId:          aws.String("shardId-000000000000"),
		StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon},
	}, source.WithoutInitialResponse)
	require.NoError(t, err)
	events := sub.GetStream()
	t.Cleanup(func() { _ = events.Close() })
	got := make(chan string, 100)
	go func() {
		defer close(got)
		for ev := range events.Events() {
			if e, ok := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent); ok {
				for _, r := range e.Value.Records {
					got <- string(r.Data)
				}
			}
		}
	}()
	for _, want := range []string{"old-1", "old-2"} {
		select {
		case d := <-got:
			require.Equal(t, want, d)
		case <-time.After(20 * time.Second):
			t.Fatalf("the subscription did not deliver %s", want)
		}
	}

	var notes []string
	s := &soak{runner: &runner{kc: kc, cutter: cutter, logf: func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) }, plan: soakPlan},
		start: time.Now(), active: map[string]int{}, quiet: map[string]time.Time{}}
	st := &soakStream{name: name, label: name + "#1", dyn: true}
	require.NoError(t, s.removeDyn(ctx, st, time.Now()))
	assert.False(t, st.deleted.IsZero(), "the deletion's time is kept")
	require.Len(t, notes, 1)
	assert.Contains(t, notes[0], "its subscriptions ended as Kinesis ends them (fan-out connections cut: 1)")

	// Created again once the name is free, and written to at once.
	require.Eventually(t, func() bool {
		_, err := kc.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(1)})
		return err == nil
	}, 30*time.Second, 200*time.Millisecond)
	_, err = emu.WaitActive(ctx, name)
	require.NoError(t, err)
	for range 3 {
		put("new")
	}

	// The old subscription ended without a record of the new stream.
	select {
	case d, open := <-got:
		if open {
			t.Fatalf("the deleted stream's subscription delivered %q of the stream created again", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the deleted stream's subscription is still open 20 s after the deletion")
	}
}
