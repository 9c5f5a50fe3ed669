package source

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// heldRoom is a Room without a budget that says how long each reservation
// was held until it was given back.
type heldRoom struct {
	noRoom
	mu       sync.Mutex
	since    time.Time
	held     []time.Duration
	reserved bool
}

func (r *heldRoom) Reserve(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.reserved {
		r.reserved, r.since = true, time.Now()
	}
	return nil
}

func (r *heldRoom) GiveBack() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reserved {
		r.reserved = false
		r.held = append(r.held, time.Since(r.since))
	}
}

func (r *heldRoom) givenBack() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.held...)
}

// hangingKinesis answers GetShardIterator, and GetRecords with one record;
// its first GetRecords hangs as hang says, until the client gives up.
func hangingKinesis(t *testing.T, hang string) *kinesis.Client {
	answer := `{"Records":[{"Data":"aGVsbG8=","PartitionKey":"k","SequenceNumber":"5"}],"NextShardIterator":"it2","MillisBehindLatest":0}`
	var mu sync.Mutex
	calls := 0
	// A hung handler waits for the client to go, or for the test to end.
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		switch r.Header.Get("X-Amz-Target") {
		case "Kinesis_20131202.GetShardIterator":
			_, _ = w.Write([]byte(`{"ShardIterator":"it1"}`))
			return
		case "Kinesis_20131202.GetRecords":
		default:
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			switch hang {
			case "before its headers":
				select {
				case <-r.Context().Done():
				case <-release:
				}
				return
			case "mid-answer":
				w.Header().Set("Content-Length", fmt.Sprint(len(answer)))
				_, _ = w.Write([]byte(answer[:len(answer)/2]))
				http.NewResponseController(w).Flush()
				select {
				case <-r.Context().Done():
				case <-release:
				}
				return
			}
		}
		_, _ = w.Write([]byte(answer))
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return testenv.KinesisClient(srv.URL, func(o *kinesis.Options) { o.Retryer = aws.NopRetryer{} })
}

// Guards the defect: a GetRecords that hangs (a half-open connection, an
// answer that stops mid-body) held its shard's room in the byte budget for
// the whole 20 s call bound, so other shards could not use it. A call
// with nothing arriving for getRecordsStall is given up, its room given
// back, and the shard reads on.
func TestHangingGetRecordsGivesItsRoomBackAfterTheStallBound(t *testing.T) {
	for _, hang := range []string{"before its headers", "mid-answer"} {
		t.Run(hang, func(t *testing.T) {
			room := &heldRoom{}
			s := newPollingSource(Params{
				API: hangingKinesis(t, hang), Stream: "s", Shard: "shardId-000000000000",
				From:   Start{IterType: "TRIM_HORIZON"},
				Config: &consumer.Config{Limit: 100, PollInterval: 10 * time.Millisecond, IdlePollInterval: 10 * time.Millisecond, Backoff: kinesisx.Backoff{InitialInterval: 10 * time.Millisecond, MaxInterval: 20 * time.Millisecond}},
				Log:    service.MockResources().Logger(), Room: room,
				OnExpired: func() {}, OnAnswer: func(time.Time) {},
			})
			s.stallAfter = 300 * time.Millisecond
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			start := time.Now()
			b, err := s.Next(ctx)
			require.NoError(t, err)
			require.Len(t, b.Records, 1, "the shard reads on after the hung call")
			held := room.givenBack()
			require.Len(t, held, 1, "the hung call gave its room back")
			assert.Less(t, held[0], 2*time.Second, "the hung call held its room for %v", held[0])
			assert.Less(t, time.Since(start), 3*time.Second)
		})
	}
}
