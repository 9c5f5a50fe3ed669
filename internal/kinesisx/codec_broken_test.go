package kinesisx

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/logging"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sdkLines keeps the lines the SDK logs through kinesis.Options.Logger.
type sdkLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *sdkLines) Logf(c logging.Classification, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(c)+" "+fmt.Sprintf(format, v...))
}

func (l *sdkLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// cutMidBody answers 200 with a Content-Length for answer, writes half of
// it and closes the connection: a connection cut mid-transfer. The
// request is read first, so the socket is closed, not reset for the data
// left unread in it.
func cutMidBody(answer string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		defer conn.Close()
		writeCut(buf, answer)
	}
}

func writeCut(buf *bufio.ReadWriter, answer string) {
	fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.1\r\nContent-Length: %d\r\n\r\n", len(answer))
	_, _ = buf.WriteString(answer[:len(answer)/2])
	_ = buf.Flush()
}

// Guards the defect: an answer cut mid-body made the SDK warn "failed to
// discard remaining HTTP response body" after every such call (737 times
// an hour in a soak with connection resets), on top of the call's own
// error, because the codec left the broken body for the SDK to drain again.
func TestRecordsCodecLeavesNoBrokenBodyForTheSDKToDrain(t *testing.T) {
	records := strings.Repeat(`{"Data":"aGVsbG8=","PartitionKey":"k","SequenceNumber":"1"},`, 200)
	answers := map[string]string{
		"GetRecords": `{"Records":[` + strings.TrimSuffix(records, ",") + `],"NextShardIterator":"next","MillisBehindLatest":0}`,
		"PutRecords": `{"FailedRecordCount":0,"Records":[` + strings.TrimSuffix(strings.Repeat(`{"SequenceNumber":"1","ShardId":"shardId-000000000000"},`, 200), ",") + `]}`,
	}
	for op, answer := range answers {
		t.Run(op, func(t *testing.T) {
			srv := httptest.NewServer(cutMidBody(answer))
			t.Cleanup(srv.Close)
			var logged sdkLines
			client := kinesis.New(kinesis.Options{
				Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL), Retryer: aws.NopRetryer{},
				Credentials: credentials.NewStaticCredentialsProvider("id", "secret", ""),
				Logger:      &logged,
			})
			var err error
			if op == "GetRecords" {
				_, err = client.GetRecords(t.Context(), &kinesis.GetRecordsInput{ShardIterator: aws.String("it")}, WithRecordsCodec)
			} else {
				_, err = client.PutRecords(t.Context(), &kinesis.PutRecordsInput{
					StreamName: aws.String("s"), Records: []types.PutRecordsRequestEntry{{Data: []byte("x"), PartitionKey: aws.String("k")}},
				}, WithRecordsCodec)
			}
			// The cut is read as an unexpected EOF, or, when net/http closed
			// the connection first (it may, on a loopback answer that comes
			// within microseconds of the request: codec.go, requestBody),
			// as "use of closed network connection": a body that failed to
			// read either way.
			require.ErrorContains(t, err, "reading the answer", "a cut answer is the call's error")
			assert.Empty(t, logged.all(), "the call's error says it all; the SDK warns of nothing more")
		})
	}
	// A GetRecords whose bound passes mid-answer (the reader's per-call
	// timeout) is the same: its error says so, the SDK adds nothing.
	t.Run("GetRecords timed out mid-answer", func(t *testing.T) {
		answer := answers["GetRecords"]
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Length", fmt.Sprint(len(answer)))
			_, _ = w.Write([]byte(answer[:len(answer)/2]))
			http.NewResponseController(w).Flush()
			<-r.Context().Done()
		}))
		t.Cleanup(srv.Close)
		var logged sdkLines
		client := kinesis.New(kinesis.Options{
			Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL), Retryer: aws.NopRetryer{},
			Credentials: credentials.NewStaticCredentialsProvider("id", "secret", ""),
			Logger:      &logged,
		})
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, err := client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String("it")}, WithRecordsCodec)
		// The body fails with the context's error, or with the connection
		// net/http closed for it ("use of closed network connection"), as
		// the race between the two falls.
		require.ErrorContains(t, err, "reading the answer")
		assert.Empty(t, logged.all(), "the call's error says it all; the SDK warns of nothing more")
	})
}
