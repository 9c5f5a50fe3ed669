package chaos

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
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
	fanOut := testenv.KinesisClient("https://"+cutter.Addr, func(o *kinesis.Options) {
		o.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.TLSClientConfig = tlsCfg })
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

// A DeleteStream that the emulator carried out but did not answer in time
// is sent again by the SDK, and the second attempt is answered "not
// found". The soak deleted the incarnation all the same: it goes on
// (seed 9's hour with efo ended on that answer).
func TestSoakDeletionGoesOnWhenAnEarlierAttemptDeletedTheStream(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	ctx := t.Context()
	kc := emu.Client()
	const name = dynPrefix + "2"
	emu.MustCreateStream(t, name, 1)
	// The first attempt, carried out and not answered in time.
	_, err := kc.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(name), EnforceConsumerDeletion: aws.Bool(true)})
	require.NoError(t, err)

	var notes []string
	s := &soak{runner: &runner{kc: kc, logf: func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) }, plan: soakPlan},
		start: time.Now(), active: map[string]int{}, quiet: map[string]time.Time{}}
	st := &soakStream{name: name, label: name + "#1", dyn: true}
	require.NoError(t, s.removeDyn(ctx, st, time.Now()), "the stream is gone, as the soak asked")
	assert.False(t, st.deleted.IsZero(), "the incarnation counts as deleted")
	require.Len(t, notes, 2)
	assert.Contains(t, notes[0], "an earlier attempt of the call, not answered in time, deleted it")
	assert.Contains(t, notes[1], "streams: deleted "+name)
}

// A split or a create that kinesis-mock carried out but answered too late
// is sent again by the SDK and refused (the stream UPDATING, the name in
// use). The runner goes on when the shard is closed or the stream is
// there, and not when the refusal has another cause.
func TestReshardAndCreateGoOnWhenAnEarlierAttemptCarriedThemOut(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	ctx := t.Context()
	kc := emu.Client()
	var notes []string
	r := &runner{kc: kc, kin: emu, logf: func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) }, plan: soakPlan}
	s := &soak{runner: r, start: time.Now(), active: map[string]int{}, quiet: map[string]time.Time{}}
	inUse := &types.ResourceInUseException{Message: aws.String("stream is UPDATING")}

	const name = "split-again"
	emu.MustCreateStream(t, name, 1)
	shard := aws.String("shardId-000000000000")
	assert.False(t, r.closedByEarlierAttempt(ctx, name, inUse, shard), "the shard is open: the refusal has another cause")
	_, err := kc.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String(name), ShardToSplit: shard, NewStartingHashKey: aws.String("170141183460469231731687303715884105728")})
	require.NoError(t, err)
	assert.True(t, r.closedByEarlierAttempt(ctx, name, inUse, shard), "the shard is closed: the split went through")
	assert.False(t, r.closedByEarlierAttempt(ctx, name, context.DeadlineExceeded, shard), "an unanswered call is not an answer")

	assert.False(t, s.createdByEarlierAttempt(ctx, "never-created"))
	assert.True(t, s.createdByEarlierAttempt(ctx, name), "the name is taken by an ACTIVE stream")
	_, err = kc.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(name)})
	require.NoError(t, err)
	assert.False(t, s.createdByEarlierAttempt(ctx, name), "a stream being deleted is the incarnation before")
	t.Log(strings.Join(notes, "\n"))
}
