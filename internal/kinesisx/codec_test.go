package kinesisx

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// capture is an HTTP client that keeps each request's headers and body and
// answers with status and answer (200 and an empty result if unset).
type capture struct {
	bodies  [][]byte
	headers []http.Header
	status  int
	answer  string
}

func (c *capture) Do(r *http.Request) (*http.Response, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	c.bodies = append(c.bodies, b)
	c.headers = append(c.headers, r.Header.Clone())
	status, answer := c.status, c.answer
	if status == 0 {
		status, answer = 200, `{"FailedRecordCount":0,"Records":[]}`
	}
	return &http.Response{
		StatusCode: status, Header: http.Header{"Content-Type": {"application/x-amz-json-1.1"}},
		Body: io.NopCloser(strings.NewReader(answer)), Request: r,
	}, nil
}

func testClient(c *capture) *kinesis.Client {
	return kinesis.New(kinesis.Options{
		Region: "eu-west-1", HTTPClient: c, BaseEndpoint: aws.String("http://127.0.0.1:1"),
		Credentials: credentials.NewStaticCredentialsProvider("id", "secret", ""),
	})
}

// TestPutRecordsEncoderWritesTheSDKsRequest sends the same inputs through
// the SDK's encoder and through WithPutRecordsCodec and compares what
// reaches the wire: the same JSON document, the same signed headers but
// the signature and the body hash is of the body actually sent.
func TestPutRecordsEncoderWritesTheSDKsRequest(t *testing.T) {
	hk := "170141183460469231731687303715884105728"
	inputs := map[string]*kinesis.PutRecordsInput{
		"plain": {StreamName: aws.String("orders"), Records: []types.PutRecordsRequestEntry{
			{Data: []byte("hello"), PartitionKey: aws.String("k1")},
			{Data: []byte{0, 1, 2, 0xff, 0xfe}, PartitionKey: aws.String("k2"), ExplicitHashKey: &hk},
			{Data: []byte{}, PartitionKey: aws.String("")},
		}},
		"keys that need escaping": {StreamARN: aws.String("arn:aws:kinesis:eu-west-1:123456789012:stream/a\"b"), Records: []types.PutRecordsRequestEntry{
			{Data: []byte("x"), PartitionKey: aws.String("quote\" back\\ tab\t nl\n nul\x00 <&> é 日本 \x7f")},
			{Data: []byte("y"), PartitionKey: aws.String("bad utf-8 \xff\xfe end")},
		}},
		"both stream fields": {StreamName: aws.String("s"), StreamARN: aws.String("arn:aws:kinesis:us-east-1:1:stream/s"),
			Records: []types.PutRecordsRequestEntry{{Data: make([]byte, 1000), PartitionKey: aws.String("k")}}},
		"dry run goes to the SDK": {StreamName: aws.String("s"), DryRun: aws.Bool(true),
			Records: []types.PutRecordsRequestEntry{{Data: []byte("d"), PartitionKey: aws.String("k")}}},
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			var sdk, ours capture
			_, err := testClient(&sdk).PutRecords(context.Background(), in)
			require.NoError(t, err)
			_, err = testClient(&ours).PutRecords(context.Background(), in, WithPutRecordsCodec)
			require.NoError(t, err)

			var want, got any
			require.NoError(t, json.Unmarshal(sdk.bodies[0], &want), "%s", sdk.bodies[0])
			require.NoError(t, json.Unmarshal(ours.bodies[0], &got), "%s", ours.bodies[0])
			assert.Equal(t, want, got)
			for _, h := range []string{"X-Amz-Target", "Content-Type", "Content-Length"} {
				assert.Equal(t, sdk.headers[0].Get(h), ours.headers[0].Get(h), h)
			}
			assert.Contains(t, ours.headers[0].Get("Authorization"), "SignedHeaders=")
		})
	}
}

// TestPutRecordsDecoderReadsWhatTheSDKReads gives the SDK's decoder and
// WithPutRecordsCodec the same answers and compares what the caller gets:
// results, refusals, counts, and errors.
func TestPutRecordsDecoderReadsWhatTheSDKReads(t *testing.T) {
	for name, tc := range map[string]struct {
		status  int
		answer  string
		ownPath bool // decoded without the SDK's decoder
	}{
		"accepted": {200, `{"EncryptionType":"NONE","FailedRecordCount":0,"Records":[` +
			`{"SequenceNumber":"49590338271490256608559692538361571095921575989136588898","ShardId":"shardId-000000000001"},` +
			`{"SequenceNumber":"49590338271490256608559692540925702759324208523137515618","ShardId":"shardId-000000000004"}]}`, true},
		"some refused": {200, `{"FailedRecordCount":2,"Records":[` +
			`{"ErrorCode":"ProvisionedThroughputExceededException","ErrorMessage":"Rate exceeded for shard shardId-000000000001 in stream s under account 1."},` +
			`{"SequenceNumber":"1","ShardId":"shardId-000000000000"},` +
			`{"ErrorCode":"InternalFailure","ErrorMessage":"Internal service failure."}]}`, true},
		"white space, nulls and fields it does not know": {200, "{ \"Future\" : {\"a\":[1,2.5e3,-3,true,false,null,{\"b\":\"c\"}]},\n\t\"Records\" : [ { \"ShardId\" : \"shardId-000000000002\" , \"SequenceNumber\":\"7\", \"ErrorCode\": null, \"New\": 1.5 } ] ,\r\n \"FailedRecordCount\" : 0 }", true},
		"no results":   {200, `{"FailedRecordCount":0,"Records":[]}`, true},
		"escaped text": {200, `{"FailedRecordCount":1,"Records":[{"ErrorCode":"InternalFailure","ErrorMessage":"a \"quoted\" \u00e9 word"}]}`, false},
		"broken JSON":  {200, `{"FailedRecordCount":1,"Records":[{"ErrorCode":`, false},
		"throttled": {400, `{"__type":"ProvisionedThroughputExceededException","message":"Rate exceeded for stream s under account 1."}`, false},
		"not found": {400, `{"__type":"ResourceNotFoundException","message":"Stream s under account 1 not found."}`, false},
	} {
		t.Run(name, func(t *testing.T) {
			in := &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: []types.PutRecordsRequestEntry{{Data: []byte("d"), PartitionKey: aws.String("k")}}}
			want, wantErr := testClient(&capture{status: tc.status, answer: tc.answer}).PutRecords(context.Background(), in)
			got, gotErr := testClient(&capture{status: tc.status, answer: tc.answer}).PutRecords(context.Background(), in, WithPutRecordsCodec)
			if wantErr != nil {
				require.Error(t, gotErr)
				assert.Equal(t, ErrorCode(wantErr), ErrorCode(gotErr))
				assert.IsType(t, errors.Unwrap(wantErr), errors.Unwrap(gotErr))
				return
			}
			require.NoError(t, gotErr)
			assert.Equal(t, want.Records, got.Records)
			assert.Equal(t, want.FailedRecordCount, got.FailedRecordCount)
			assert.Equal(t, want.EncryptionType, got.EncryptionType)

			var own kinesis.PutRecordsOutput
			assert.Equal(t, tc.ownPath, decodePutRecordsOutput([]byte(tc.answer), &own), "decoded without the SDK")
		})
	}
}

// TestAppendPutRecordsSizesOnce checks that a plain request is written
// without the buffer growing: one allocation, the body's.
func TestAppendPutRecordsSizesOnce(t *testing.T) {
	in := &kinesis.PutRecordsInput{StreamName: aws.String("bench")}
	for range 500 {
		in.Records = append(in.Records, types.PutRecordsRequestEntry{Data: make([]byte, 200), PartitionKey: aws.String("partition-key-17")})
	}
	allocs := testing.AllocsPerRun(10, func() { AppendPutRecords(nil, in) })
	assert.Equal(t, 1.0, allocs)
}

func BenchmarkPutRecordsBody(b *testing.B) {
	in := &kinesis.PutRecordsInput{StreamName: aws.String("bench")}
	for range 500 {
		in.Records = append(in.Records, types.PutRecordsRequestEntry{Data: make([]byte, 200), PartitionKey: aws.String("partition-key-17")})
	}
	b.ReportAllocs()
	for b.Loop() {
		AppendPutRecords(nil, in)
	}
}
