package faultproxy

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/producer/producertest"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// proxiedClient is a client through the proxy with the SDK's retries off,
// so each call is one request the proxy sees.
func proxiedClient(p *Proxy) *kinesis.Client {
	return testenv.KinesisClient(p.URL, func(o *kinesis.Options) { o.Retryer = aws.NopRetryer{} })
}

func putEntries(n int, tag string) []types.PutRecordsRequestEntry {
	out := make([]types.PutRecordsRequestEntry, n)
	for i := range out {
		out[i] = types.PutRecordsRequestEntry{Data: []byte(fmt.Sprintf("%s-%d", tag, i)), PartitionKey: aws.String(fmt.Sprint(i))}
	}
	return out
}

func TestIntegrationFaultProxy(t *testing.T) {
	emu := testenv.NewKinesalite(t)
	emu.MustCreateStream(t, "proxied", 2)
	p, err := Start(emu.Endpoint, 42)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	c := proxiedClient(p)
	ctx := t.Context()

	t.Run("refused entries are not written and are spliced back at their index", func(t *testing.T) {
		p.Set("PutRecords", Rule{EntryFailRate: 0.3})
		defer p.Clear()
		in := putEntries(200, "refuse")
		out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("proxied"), Records: in})
		require.NoError(t, err)
		require.Len(t, out.Records, 200)

		accepted := map[string]bool{}
		failed := 0
		for i, r := range out.Records {
			if r.ErrorCode != nil {
				failed++
				assert.Contains(t, []string{CodeThrottled, CodeInternalFailure}, *r.ErrorCode)
				continue
			}
			assert.NotEmpty(t, aws.ToString(r.SequenceNumber))
			accepted[string(in[i].Data)] = true
		}
		assert.Equal(t, int32(failed), aws.ToInt32(out.FailedRecordCount))
		assert.Greater(t, failed, 20)
		assert.Less(t, failed, 100)
		assert.Equal(t, failed, p.Stats("PutRecords").EntriesRefused)

		got, err := producertest.ReadAll(ctx, emu.Client(), "proxied")
		require.NoError(t, err)
		landed := map[string]bool{}
		for _, r := range got {
			landed[string(r.Data)] = true
		}
		assert.Equal(t, accepted, landed, "exactly the accepted entries landed")
	})

	t.Run("whole-request faults classify as the real ones would", func(t *testing.T) {
		tests := []struct {
			name string
			rule Rule
			want kinesisx.Class
			code string
		}{
			{"throttled", Rule{ThrottleRate: 1}, kinesisx.Throttled, CodeThrottled},
			{"internal failure", Rule{ErrorRate: 1}, kinesisx.Transient, CodeInternalFailure},
			{"cut connection", Rule{CutRate: 1}, kinesisx.Transient, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				p.Set(AllOperations, tt.rule)
				defer p.Clear()
				_, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("proxied"), Records: putEntries(3, tt.name)})
				require.Error(t, err)
				assert.Equal(t, tt.want, kinesisx.Classify(err), "%v", err)
				if tt.code != "" {
					var apiErr smithy.APIError
					require.True(t, errors.As(err, &apiErr))
					assert.Equal(t, tt.code, apiErr.ErrorCode())
				}
			})
		}
	})

	t.Run("other operations pass through untouched", func(t *testing.T) {
		p.Set("PutRecords", Rule{ThrottleRate: 1})
		defer p.Clear()
		_, err := c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("proxied")})
		require.NoError(t, err)
	})

	t.Run("the same seed makes the same decisions", func(t *testing.T) {
		decisions := func() []bool {
			q, err := Start(emu.Endpoint, 7)
			require.NoError(t, err)
			defer q.Close()
			q.Set(AllOperations, Rule{ThrottleRate: 0.5})
			var out []bool
			for range 20 {
				_, err := proxiedClient(q).DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("proxied")})
				out = append(out, err != nil)
			}
			return out
		}
		assert.Equal(t, decisions(), decisions())
	})
}
