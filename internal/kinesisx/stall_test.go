package kinesisx

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Guards a false positive of the stall bound: an answer that keeps
// arriving, slowly, for several stall bounds in all (a large answer on a
// slow link) is not given up, because each part of its body restarts the
// clock. Only a gap of the bound with nothing arriving ends a call.
func TestStallGuardLetsASlowAnswerThatKeepsArrivingFinish(t *testing.T) {
	const (
		bound  = 300 * time.Millisecond
		parts  = 30
		everyP = 40 * time.Millisecond // parts·everyP is 4 stall bounds
	)
	answer := `{"Records":[` + strings.TrimSuffix(strings.Repeat(`{"Data":"aGVsbG8=","PartitionKey":"k","SequenceNumber":"1"},`, 300), ",") + `],"NextShardIterator":"next","MillisBehindLatest":0}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.Header().Set("Content-Length", fmt.Sprint(len(answer)))
		// The answer starts a little after the request: on loopback, an
		// answer that comes within microseconds of the request's last byte
		// can have net/http close the connection under it, as the SDK
		// closes the request body once headers arrive (codec.go,
		// requestBody), which is not what this test is about.
		time.Sleep(everyP)
		rc := http.NewResponseController(w)
		size := (len(answer) + parts - 1) / parts
		for i := 0; i < len(answer); i += size {
			_, _ = w.Write([]byte(answer[i:min(i+size, len(answer))]))
			_ = rc.Flush()
			time.Sleep(everyP)
		}
	}))
	t.Cleanup(srv.Close)
	client := kinesis.New(kinesis.Options{
		Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL), Retryer: aws.NopRetryer{},
		Credentials: credentials.NewStaticCredentialsProvider("id", "secret", ""),
	})
	start := time.Now()
	g := NewStallGuard(t.Context(), bound)
	out, err := client.GetRecords(g.Context(), &kinesis.GetRecordsInput{ShardIterator: aws.String("it")}, WithRecordsCodec, g.Option)
	err = g.Done(err)
	took := time.Since(start)
	require.NoError(t, err, "an answer arriving for %v, a part every %v, with a stall bound of %v", took, everyP, bound)
	assert.Len(t, out.Records, 300)
	assert.Greater(t, took, 2*bound, "the answer took several stall bounds in all")
}
