package streams

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// pagedStreams serves ListStreams two streams a page, either as AWS does
// (summaries, NextToken) or as the emulators do (names, HasMoreStreams).
type pagedStreams struct {
	names     []string
	summaries bool

	mu        sync.Mutex
	listCalls []time.Time
	describes []string
}

func (p *pagedStreams) ListStreams(_ context.Context, in *kinesis.ListStreamsInput, _ ...func(*kinesis.Options)) (*kinesis.ListStreamsOutput, error) {
	p.mu.Lock()
	p.listCalls = append(p.listCalls, time.Now())
	p.mu.Unlock()
	start := 0
	switch {
	case in.NextToken != nil:
		_, _ = fmt.Sscanf(*in.NextToken, "page-%d", &start)
	case in.ExclusiveStartStreamName != nil:
		start = slices.Index(p.names, *in.ExclusiveStartStreamName) + 1
	}
	end := min(start+2, len(p.names))
	out := &kinesis.ListStreamsOutput{HasMoreStreams: aws.Bool(end < len(p.names))}
	for _, n := range p.names[start:end] {
		if p.summaries {
			out.StreamSummaries = append(out.StreamSummaries, types.StreamSummary{StreamName: aws.String(n),
				StreamARN: aws.String("arn:aws:kinesis:us-east-1:1:stream/" + n), StreamStatus: types.StreamStatusActive,
				StreamCreationTimestamp: aws.Time(time.UnixMilli(1000))})
		}
		out.StreamNames = append(out.StreamNames, n)
	}
	if p.summaries && end < len(p.names) {
		out.NextToken = aws.String(fmt.Sprintf("page-%d", end))
	}
	return out, nil
}

func (p *pagedStreams) DescribeStreamSummary(_ context.Context, in *kinesis.DescribeStreamSummaryInput, _ ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	p.mu.Lock()
	p.describes = append(p.describes, *in.StreamName)
	p.mu.Unlock()
	if *in.StreamName == "t-gone" {
		return nil, &types.ResourceNotFoundException{Message: aws.String("gone")}
	}
	return &kinesis.DescribeStreamSummaryOutput{StreamDescriptionSummary: &types.StreamDescriptionSummary{
		StreamName: in.StreamName, StreamARN: aws.String("arn:aws:kinesis:us-east-1:1:stream/" + *in.StreamName),
		StreamStatus: types.StreamStatusActive, StreamCreationTimestamp: aws.Time(time.UnixMilli(2000)),
	}}, nil
}

func (p *pagedStreams) ListTagsForStream(_ context.Context, in *kinesis.ListTagsForStreamInput, _ ...func(*kinesis.Options)) (*kinesis.ListTagsForStreamOutput, error) {
	// One tag a page, to follow HasMoreTags: t-1 and t-3 are the team's.
	all := []types.Tag{{Key: aws.String("env"), Value: aws.String("prod")}}
	if *in.StreamName == "t-1" || *in.StreamName == "t-3" {
		all = append(all, types.Tag{Key: aws.String("team"), Value: aws.String("a")})
	}
	i := 0
	if in.ExclusiveStartTagKey != nil {
		i = slices.IndexFunc(all, func(t types.Tag) bool { return *t.Key == *in.ExclusiveStartTagKey }) + 1
	}
	return &kinesis.ListTagsForStreamOutput{Tags: all[i : i+1], HasMoreTags: aws.Bool(i+1 < len(all))}, nil
}

func TestListerFollowsEveryPage(t *testing.T) {
	names := []string{"orders", "t-1", "t-2", "t-3", "t-gone", "x-1", "t-4"}
	for _, summaries := range []bool{true, false} {
		t.Run(fmt.Sprintf("summaries=%v", summaries), func(t *testing.T) {
			api := &pagedStreams{names: names, summaries: summaries}
			rules, err := ParseRules([]string{"t-*"}, nil)
			require.NoError(t, err)
			got, err := NewLister(api, kinesisx.DefaultBackoff).List(t.Context(), rules)
			require.NoError(t, err)
			var found []string
			for _, id := range got {
				found = append(found, id.Name)
				assert.Equal(t, "arn:aws:kinesis:us-east-1:1:stream/"+id.Name, id.Key())
				assert.True(t, id.Readable())
			}
			// The last page holds t-4: a listing that stopped at the first
			// page without a NextToken (the SDK's paginator on the
			// emulators) would miss it.
			want := []string{"t-1", "t-2", "t-3", "t-4"}
			if summaries {
				want = []string{"t-1", "t-2", "t-3", "t-4", "t-gone"}
				assert.Empty(t, api.describes, "summaries carry the identity: nothing to describe")
			} else {
				assert.Equal(t, []string{"t-1", "t-2", "t-3", "t-gone", "t-4"}, api.describes, "only the matching names are described")
			}
			assert.Equal(t, want, found)
			assert.Len(t, api.listCalls, 4)
		})
	}
	t.Run("tags", func(t *testing.T) {
		api := &pagedStreams{names: names}
		rules, err := ParseRules([]string{"t-*"}, map[string]string{"team": "a", "env": "prod"})
		require.NoError(t, err)
		got, err := NewLister(api, kinesisx.DefaultBackoff).List(t.Context(), rules)
		require.NoError(t, err)
		require.Len(t, got, 2)
		assert.Equal(t, []string{"t-1", "t-3"}, []string{got[0].Name, got[1].Name})
	})
}

// TestListerKeepsListStreamsUnderTheAccountLimit lists 40 pages: the
// calls keep to 5 a second. The limiter spaces its permits 220 ms apart;
// the fake sees a call a little after its permit, later still on a loaded
// machine, so one window of 6 calls may look shorter than the permits
// were: over all 40 calls the rate must stay at or under 5/s, and no 6
// calls may come within 800 ms (5 permits are 1.1 s apart).
func TestListerKeepsListStreamsUnderTheAccountLimit(t *testing.T) {
	var names []string
	for i := range 80 {
		names = append(names, fmt.Sprintf("s-%03d", i))
	}
	api := &pagedStreams{names: names, summaries: true}
	rules, err := ParseRules([]string{"none-*"}, nil)
	require.NoError(t, err)
	_, err = NewLister(api, kinesisx.DefaultBackoff).List(t.Context(), rules)
	require.NoError(t, err)
	require.Len(t, api.listCalls, 40)
	n := len(api.listCalls)
	assert.GreaterOrEqual(t, api.listCalls[n-1].Sub(api.listCalls[0]), time.Duration(n-1)*time.Second/kinesisx.MaxListStreamsPerSecond,
		"40 calls at most 5 a second")
	for i := range api.listCalls {
		j := i + kinesisx.MaxListStreamsPerSecond
		if j < n {
			assert.GreaterOrEqual(t, api.listCalls[j].Sub(api.listCalls[i]), 800*time.Millisecond,
				"calls %d..%d (6 calls) within 800 ms", i, j)
		}
	}
}
