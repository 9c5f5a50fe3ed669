package kinesisx

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// instantHTTP answers every PutRecords at once with n accepted results,
// so a benchmark through the client measures the client's own work.
type instantHTTP struct{ answer string }

func (c instantHTTP) Do(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	return &http.Response{
		StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-amz-json-1.1"}},
		Body: io.NopCloser(strings.NewReader(c.answer)), Request: r,
	}, nil
}

// BenchmarkPutRecordsRequest is what one PutRecords costs the process on
// top of the round trip: the SDK's middleware (endpoint, signing with the
// body's SHA-256, headers), the codec's body and answer, for requests of
// 64 records (an ordered output's round with 64 keys) and 500 (a full
// one), 200 B each.
func BenchmarkPutRecordsRequest(b *testing.B) {
	for _, n := range []int{64, 500} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			var answer strings.Builder
			answer.WriteString(`{"FailedRecordCount":0,"Records":[`)
			for i := range n {
				if i > 0 {
					answer.WriteByte(',')
				}
				fmt.Fprintf(&answer, `{"SequenceNumber":"4959000000000000000000000000000000000000000000000%d","ShardId":"shardId-000000000001"}`, i)
			}
			answer.WriteString("]}")
			c := testClient(&capture{})
			c = kinesis.New(c.Options(), func(o *kinesis.Options) { o.HTTPClient = instantHTTP{answer.String()} })
			data := make([]byte, 200)
			entries := make([]types.PutRecordsRequestEntry, n)
			for i := range entries {
				entries[i] = types.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(fmt.Sprint("user-", i))}
			}
			in := &kinesis.PutRecordsInput{StreamName: aws.String("events"), Records: entries}
			b.ReportAllocs()
			for b.Loop() {
				out, err := c.PutRecords(b.Context(), in, WithRecordsCodec)
				if err != nil || len(out.Records) != n {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
		})
	}
}

// BenchmarkPutRecordsLoopback is BenchmarkPutRecordsRequest over a real
// HTTP connection to a server in the same process (whose work is counted
// too), with the client the plugins use.
func BenchmarkPutRecordsLoopback(b *testing.B) {
	const n = 64
	var answer strings.Builder
	answer.WriteString(`{"FailedRecordCount":0,"Records":[`)
	for i := range n {
		if i > 0 {
			answer.WriteByte(',')
		}
		fmt.Fprintf(&answer, `{"SequenceNumber":"4959000000000000000000000000000000000000000000000%d","ShardId":"shardId-000000000001"}`, i)
	}
	answer.WriteString("]}")
	body := []byte(answer.String())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	c := kinesis.New(testClient(&capture{}).Options(), func(o *kinesis.Options) {
		o.HTTPClient = awshttp.NewBuildableClient()
		o.BaseEndpoint = aws.String(srv.URL)
	})
	data := make([]byte, 200)
	entries := make([]types.PutRecordsRequestEntry, n)
	for i := range entries {
		entries[i] = types.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(fmt.Sprint("user-", i))}
	}
	in := &kinesis.PutRecordsInput{StreamName: aws.String("events"), Records: entries}
	b.ReportAllocs()
	for b.Loop() {
		out, err := c.PutRecords(b.Context(), in, WithRecordsCodec)
		if err != nil || len(out.Records) != n {
			b.Fatal(err)
		}
	}
}
