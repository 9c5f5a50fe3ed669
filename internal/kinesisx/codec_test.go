package kinesisx

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
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
	reqs    []*http.Request // without their bodies
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
	c.reqs = append(c.reqs, r.Clone(context.Background()))
	status, answer := c.status, c.answer
	if status == 0 {
		status, answer = 200, `{"FailedRecordCount":0,"Records":[]}`
	}
	return &http.Response{
		StatusCode: status, Header: http.Header{"Content-Type": {"application/x-amz-json-1.1"}},
		Body: io.NopCloser(strings.NewReader(answer)), Request: r, ContentLength: int64(len(answer)),
	}, nil
}

func testClient(c *capture) *kinesis.Client {
	return kinesis.New(kinesis.Options{
		Region: "eu-west-1", HTTPClient: c, BaseEndpoint: aws.String("http://127.0.0.1:1"),
		// An answer the SDK finds broken is not asked for again.
		Retryer:     aws.NopRetryer{},
		Credentials: credentials.NewStaticCredentialsProvider("id", "secret", ""),
	})
}

// TestPutRecordsEncoderWritesTheSDKsRequest sends the same inputs through
// the SDK's encoder and through WithRecordsCodec and compares what
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
			_, err = testClient(&ours).PutRecords(context.Background(), in, WithRecordsCodec)
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

// TestPutRecordsSignatureCoversTheBodySent signs the request the codec sent
// again, from the body that reached the wire, and expects the signature the
// SDK sent: the body's hash the codec gives the signer is of that body.
func TestPutRecordsSignatureCoversTheBodySent(t *testing.T) {
	for _, n := range []int{1, 500} {
		t.Run(fmt.Sprint(n, " records"), func(t *testing.T) {
			in := &kinesis.PutRecordsInput{StreamName: aws.String("orders")}
			for i := range n {
				in.Records = append(in.Records, types.PutRecordsRequestEntry{Data: []byte(strings.Repeat("d", 200+i)), PartitionKey: aws.String(fmt.Sprint("k", i))})
			}
			var c capture
			_, err := testClient(&c).PutRecords(t.Context(), in, WithRecordsCodec)
			require.NoError(t, err)
			sent := c.reqs[0]
			at, err := time.Parse("20060102T150405Z", sent.Header.Get("X-Amz-Date"))
			require.NoError(t, err)
			signAgain := func(body []byte) string {
				r := sent.Clone(t.Context())
				r.Header.Del("Authorization")
				sum := sha256.Sum256(body)
				require.NoError(t, v4.NewSigner().SignHTTP(t.Context(), aws.Credentials{AccessKeyID: "id", SecretAccessKey: "secret"},
					r, hex.EncodeToString(sum[:]), "kinesis", "eu-west-1", at))
				return r.Header.Get("Authorization")
			}
			assert.Equal(t, sent.Header.Get("Authorization"), signAgain(c.bodies[0]))
			// The check can tell: another body gives another signature.
			assert.NotEqual(t, sent.Header.Get("Authorization"), signAgain(append(c.bodies[0], ' ')))
		})
	}
}

// TestPutRecordsDecoderReadsWhatTheSDKReads gives the SDK's decoder and
// WithRecordsCodec the same answers and compares what the caller gets:
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
		"white space and nulls":           {200, "{ \n\t\"Records\" : [ { \"ShardId\" : \"shardId-000000000002\" , \"SequenceNumber\":\"7\", \"ErrorCode\": null } ] ,\r\n \"FailedRecordCount\" : 0 }", true},
		"a field it does not know":        {200, `{"Future":{"a":[1,2.5e3,-3,true,false,null]},"Records":[{"ShardId":"shardId-000000000002","SequenceNumber":"7"}],"FailedRecordCount":0}`, false},
		"a result field it does not know": {200, `{"Records":[{"ShardId":"shardId-000000000002","SequenceNumber":"7","New":1.5}],"FailedRecordCount":0}`, false},
		"no results":                      {200, `{"FailedRecordCount":0,"Records":[]}`, true},
		"escaped text":                    {200, `{"FailedRecordCount":1,"Records":[{"ErrorCode":"InternalFailure","ErrorMessage":"a \"quoted\" \u00e9 word"}]}`, false},
		"broken JSON":                     {200, `{"FailedRecordCount":1,"Records":[{"ErrorCode":`, false},
		"throttled":                       {400, `{"__type":"ProvisionedThroughputExceededException","message":"Rate exceeded for stream s under account 1."}`, false},
		"not found":                       {400, `{"__type":"ResourceNotFoundException","message":"Stream s under account 1 not found."}`, false},
	} {
		t.Run(name, func(t *testing.T) {
			in := &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: []types.PutRecordsRequestEntry{{Data: []byte("d"), PartitionKey: aws.String("k")}}}
			want, wantErr := testClient(&capture{status: tc.status, answer: tc.answer}).PutRecords(context.Background(), in)
			got, gotErr := testClient(&capture{status: tc.status, answer: tc.answer}).PutRecords(context.Background(), in, WithRecordsCodec)
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

// getAnswers are GetRecords answers as Kinesis and the emulators write
// them, and some they could.
var getAnswers = map[string]string{
	"records": `{"MillisBehindLatest":0,"NextShardIterator":"AAAAAAAAAAH+iter/x==","Records":[` +
		`{"ApproximateArrivalTimestamp":1.732975147123E9,"Data":"aGVsbG8=","PartitionKey":"k1","SequenceNumber":"49590338271490256608559692538361571095921575989136588898"},` +
		`{"ApproximateArrivalTimestamp":1.732975147123E9,"Data":"","EncryptionType":"KMS","PartitionKey":"","SequenceNumber":"49590338271490256608559692538361571095921575989136588899"},` +
		`{"ApproximateArrivalTimestamp":1732975148.5,"Data":"AAEC//4=","EncryptionType":"NONE","PartitionKey":"k3","SequenceNumber":"3"}]}`,
	"kinesalite style": `{"Records":[{"PartitionKey":"a","Data":"eA==","SequenceNumber":"1","ApproximateArrivalTimestamp":1700000000.001}],"NextShardIterator":"it","MillisBehindLatest":1500}`,
	"empty":            `{"MillisBehindLatest":12,"NextShardIterator":"it","Records":[]}`,
	"closed shard":     `{"MillisBehindLatest":0,"Records":[],"ChildShards":[]}`,
	"child shards": `{"MillisBehindLatest":0,"Records":[],"ChildShards":[{"ShardId":"shardId-000000000002","ParentShards":["shardId-000000000000"],` +
		`"HashKeyRange":{"StartingHashKey":"0","EndingHashKey":"1"}}]}`,
	"null iterator and white space":   "{ \n \"NextShardIterator\" : null, \"Records\" : [ { \"Data\" : \"eA==\",\t\"SequenceNumber\": \"5\" } ] }",
	"a field it does not know":        `{"Future":[{"x":null},2e-3,true],"NextShardIterator":"it","Records":[]}`,
	"a record field it does not know": `{"NextShardIterator":"it","Records":[{"Data":"eA==","New":{"y":[1]},"SequenceNumber":"5"}]}`,
	"escaped key":                     `{"NextShardIterator":"it","Records":[{"Data":"eA==","PartitionKey":"a\"b","SequenceNumber":"1"}]}`,
	"escaped slash":                   `{"NextShardIterator":"it","Records":[{"Data":"a\/8=","PartitionKey":"a","SequenceNumber":"1"}]}`,
	"bad base64":                      `{"NextShardIterator":"it","Records":[{"Data":"!!!","PartitionKey":"a","SequenceNumber":"1"}]}`,
	"cut short":                       `{"NextShardIterator":"it","Records":[{"Data":"eA==","Parti`,
}

// TestGetRecordsDecoderReadsWhatTheSDKReads gives the SDK's decoder and
// WithRecordsCodec the same GetRecords answers and compares the results.
func TestGetRecordsDecoderReadsWhatTheSDKReads(t *testing.T) {
	ownPath := map[string]bool{"records": true, "kinesalite style": true, "empty": true, "closed shard": true, "null iterator and white space": true}
	for name, answer := range getAnswers {
		t.Run(name, func(t *testing.T) {
			want, wantErr := getWith(answer, false)
			got, gotErr := getWith(answer, true)
			if wantErr != nil {
				require.Error(t, gotErr)
				assert.IsType(t, errors.Unwrap(wantErr), errors.Unwrap(gotErr))
				return
			}
			require.NoError(t, gotErr)
			assertSameGetRecords(t, want, got)
			var own kinesis.GetRecordsOutput
			assert.Equal(t, ownPath[name], decodeGetRecordsOutput([]byte(answer), &own), "decoded without the SDK")
		})
	}
}

func getWith(answer string, codec bool) (*kinesis.GetRecordsOutput, error) {
	var opts []func(*kinesis.Options)
	if codec {
		opts = append(opts, WithRecordsCodec)
	}
	return testClient(&capture{status: 200, answer: answer}).GetRecords(context.Background(),
		&kinesis.GetRecordsInput{ShardIterator: aws.String("it")}, opts...)
}

func assertSameGetRecords(t testing.TB, want, got *kinesis.GetRecordsOutput) {
	t.Helper()
	assert.Equal(t, want.Records, got.Records)
	assert.Equal(t, want.NextShardIterator, got.NextShardIterator)
	assert.Equal(t, want.MillisBehindLatest, got.MillisBehindLatest)
	assert.Equal(t, want.ChildShards, got.ChildShards)
}

// FuzzGetRecordsDecoder checks that whatever the body, the codec returns
// what the SDK returns, or an error when the SDK does.
func FuzzGetRecordsDecoder(f *testing.F) {
	for _, a := range getAnswers {
		f.Add(a)
	}
	f.Fuzz(func(t *testing.T, answer string) {
		want, wantErr := getWith(answer, false)
		got, gotErr := getWith(answer, true)
		if wantErr != nil {
			require.Error(t, gotErr)
			return
		}
		require.NoError(t, gotErr)
		assertSameGetRecords(t, want, got)
	})
}

// BenchmarkGetRecordsDecode reads a full answer (10,000 records of 200
// bytes) through the client, with and without the codec.
func BenchmarkGetRecordsDecode(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"MillisBehindLatest":0,"NextShardIterator":"AAAAAAAAAAH+iter/x==","Records":[`)
	data := base64.StdEncoding.EncodeToString(make([]byte, 200))
	for i := range 10000 {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"ApproximateArrivalTimestamp":1.732975147123E9,"Data":"%s","PartitionKey":"key-%d","SequenceNumber":"4959033827149025660855969253836157109592157598913%07d"}`, data, i%500, i)
	}
	sb.WriteString("]}")
	body := sb.String()
	for _, codec := range []bool{false, true} {
		b.Run(fmt.Sprintf("codec=%v", codec), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := getWith(body, codec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzPutRecordsDecoder checks that whatever the answer, the codec returns
// what the SDK returns, or an error when the SDK does.
func FuzzPutRecordsDecoder(f *testing.F) {
	f.Add(`{"EncryptionType":"NONE","FailedRecordCount":1,"Records":[{"SequenceNumber":"1","ShardId":"shardId-000000000001"},{"ErrorCode":"InternalFailure","ErrorMessage":"m"}]}`)
	f.Add(`{"FailedRecordCount":0,"Records":[],"Future":[1,{"a":null}]}`)
	f.Fuzz(func(t *testing.T, answer string) {
		in := &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: []types.PutRecordsRequestEntry{{Data: []byte("d"), PartitionKey: aws.String("k")}}}
		want, wantErr := testClient(&capture{status: 200, answer: answer}).PutRecords(context.Background(), in)
		got, gotErr := testClient(&capture{status: 200, answer: answer}).PutRecords(context.Background(), in, WithRecordsCodec)
		if wantErr != nil {
			require.Error(t, gotErr)
			return
		}
		require.NoError(t, gotErr)
		assert.Equal(t, want.Records, got.Records)
		assert.Equal(t, want.FailedRecordCount, got.FailedRecordCount)
		assert.Equal(t, want.EncryptionType, got.EncryptionType)
	})
}

// lateCheck is an HTTP client that reads a request's Content-Length and
// answers at once, keeping the body: net/http copies what is left of a body
// after its Content-Length (to check that nothing is) on its writer
// goroutine, which a fast answer can outrun.
type lateCheck struct{ body io.ReadCloser }

func (c *lateCheck) Do(r *http.Request) (*http.Response, error) {
	if _, err := io.Copy(io.Discard, io.LimitReader(r.Body, r.ContentLength)); err != nil {
		return nil, err
	}
	c.body = r.Body
	return &http.Response{
		StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-amz-json-1.1"}},
		Body: io.NopCloser(strings.NewReader(`{"FailedRecordCount":0,"Records":[{"SequenceNumber":"1","ShardId":"shardId-000000000000"}]}`)), Request: r,
	}, nil
}

// The SDK closes a request's body as soon as the answer's headers arrive.
// net/http's check for bytes past the Content-Length, run after that, must
// then see the body end, not fail: a failure there closes the connection
// under the answer being read, and the records, already written, are sent
// again (seen as 40 duplicates in 5 of 32 kinesalite order runs).
func TestPutRecordsBodyEndsQuietlyAfterTheSDKClosesIt(t *testing.T) {
	c := &lateCheck{}
	client := kinesis.New(kinesis.Options{
		Region: "eu-west-1", HTTPClient: c, BaseEndpoint: aws.String("http://127.0.0.1:1"),
		Retryer: aws.NopRetryer{}, Credentials: credentials.NewStaticCredentialsProvider("id", "secret", ""),
	})
	_, err := client.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String("orders"), Records: []types.PutRecordsRequestEntry{
		{Data: []byte(strings.Repeat("x", 8<<10)), PartitionKey: aws.String("k")},
	}}, WithRecordsCodec)
	require.NoError(t, err)
	require.NotNil(t, c.body)
	// What net/http does next on its writer goroutine (transfer.go,
	// writeBody): copy the rest of the body, expecting nothing and no error.
	n, err := io.Copy(io.Discard, c.body)
	assert.NoError(t, err, "the check past the Content-Length of a body the SDK has closed")
	assert.Zero(t, n)
}

// BenchmarkGetRecordsLargeAnswer reads an answer of ten records of 900 KB
// (about 12 MiB of JSON) through the client with the codec. Its B/op is
// what one answer costs to read: the records' 8.6 MiB, plus what the
// codec holds next to them (before the streaming decoder: the whole body).
func BenchmarkGetRecordsLargeAnswer(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"MillisBehindLatest":0,"NextShardIterator":"AAAAAAAAAAH+iter/x==","Records":[`)
	data := base64.StdEncoding.EncodeToString(make([]byte, 900_000))
	for i := range 10 {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"ApproximateArrivalTimestamp":1.732975147123E9,"Data":"%s","PartitionKey":"key-%d","SequenceNumber":"4959033827149025660855969253836157109592157598913%07d"}`, data, i, i)
	}
	sb.WriteString("]}")
	body := sb.String()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := getWith(body, true); err != nil {
			b.Fatal(err)
		}
	}
}

// The streaming decoder reads the same answers however the body arrives:
// one byte per read here, so every token straddles the window's edge; an
// answer it does not take is handed to the SDK whole.
func TestGetRecordsDecoderReadsAStreamInPieces(t *testing.T) {
	for name, answer := range getAnswers {
		t.Run(name, func(t *testing.T) {
			want, wantErr := getWith(answer, false)
			var got kinesis.GetRecordsOutput
			ok, body, err := decodeGetRecords(iotest.OneByteReader(strings.NewReader(answer)), 0, &got)
			require.NoError(t, err)
			if !ok {
				assert.Equal(t, answer, string(body), "the answer is rebuilt whole for the SDK")
				return
			}
			require.NoError(t, wantErr)
			assertSameGetRecords(t, want, &got)
		})
	}
}
