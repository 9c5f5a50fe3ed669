package coordinator

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldAnswers serves consumertest.Kinesis's answers with big records and follows
// each answer's data with a weak pointer, so a test can see which answers
// are still reachable. Its second GetRecords blocks until release is
// closed, after saying so on fetching.
type heldAnswers struct {
	*consumertest.Kinesis
	fetching chan struct{}
	release  chan struct{}

	mu      sync.Mutex
	answers []weak.Pointer[byte]
}

// bigRecord is the size of every record's data: far beyond the tiny
// allocator's blocks, so each record's data is an object of its own.
const bigRecord = 64 << 10

func (h *heldAnswers) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	h.mu.Lock()
	n := len(h.answers)
	h.mu.Unlock()
	if n == 1 {
		select {
		case h.fetching <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	out, err := h.Kinesis.GetRecords(ctx, in, opts...)
	if err != nil || len(out.Records) == 0 {
		return out, err
	}
	for i := range out.Records {
		data := make([]byte, bigRecord)
		copy(data, out.Records[i].Data)
		out.Records[i].Data = data
	}
	h.mu.Lock()
	h.answers = append(h.answers, weak.Make(&out.Records[0].Data[0]))
	h.mu.Unlock()
	return out, nil
}

// reachable reports whether answer i's records can still be reached.
func (h *heldAnswers) reachable(i int) bool {
	h.mu.Lock()
	p := h.answers[i]
	h.mu.Unlock()
	return p.Value() != nil
}

// A shard holds at most one GetRecords answer: once the pipeline acked an
// answer, the reader keeps none of it while it fetches the next, so the
// input's memory is one answer per shard (up to `limit` records), not two.
func TestReaderKeepsNoAckedAnswerWhileFetchingTheNext(t *testing.T) {
	api := &heldAnswers{Kinesis: consumertest.NewKinesis(), fetching: make(chan struct{}), release: make(chan struct{})}
	const shard = "shardId-000000000000"
	api.Add(shard, &consumertest.KinesisShard{Records: 20})
	cfg := testConfig()
	cfg.Limit = 10
	c := startConsumer(t, cfg, api, consumertest.NewStore(cfg.LeasePeriod))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	// The first answer is delivered whole and acked; nothing of it is kept
	// here.
	ackNext := func() int {
		select {
		case b := <-c.Batches():
			b.Ack(nil)
			return len(b.Records)
		case <-ctx.Done():
			return 0
		}
	}
	require.Equal(t, 10, ackNext())
	select {
	case <-api.fetching:
	case <-ctx.Done():
		require.FailNow(t, "the reader did not fetch again after the ack")
	}

	// The reader now waits for the second answer: the first must be
	// garbage.
	assert.Eventually(t, func() bool {
		runtime.GC()
		return !api.reachable(0)
	}, 2*time.Second, 20*time.Millisecond, "the acked first answer is still reachable while the second is fetched")

	close(api.release)
	assert.Equal(t, 10, ackNext())
}
