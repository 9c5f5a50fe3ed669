package coordinator

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/reader"
)

// fakeReader is a shardReader in a state a test sets: it reads nothing.
type fakeReader struct {
	shard    consumer.Shard
	lease    atomic.Pointer[consumer.Lease]
	done     chan struct{}
	outcome  reader.Outcome
	acked    consumer.Position
	hasAcked bool
	lost     atomic.Bool
	stopping atomic.Bool
	renewals atomic.Int64
	// raised is the last mark RaiseDelivered gave.
	raisedMu sync.Mutex
	raised   consumer.Position
}

func newFakeReader(id string, l consumer.Lease) *fakeReader {
	r := &fakeReader{shard: consumer.Shard{ID: id}, done: make(chan struct{})}
	r.lease.Store(&l)
	return r
}

func (r *fakeReader) Run()                    { <-r.done }
func (r *fakeReader) Done() <-chan struct{}   { return r.done }
func (r *fakeReader) Outcome() reader.Outcome { return r.outcome }
func (r *fakeReader) Stop()                   { r.stopping.Store(true) }
func (r *fakeReader) Cancel()                 {}
func (r *fakeReader) Stopping() bool          { return r.stopping.Load() }
func (r *fakeReader) Lease() consumer.Lease   { return *r.lease.Load() }
func (r *fakeReader) LeaseRenewed(l consumer.Lease) {
	r.lease.Store(&l)
	r.renewals.Add(1)
}
func (r *fakeReader) LeaseLive() bool { return time.Now().Before(r.Lease().Deadline) }
func (r *fakeReader) MarkLost()       { r.lost.Store(true); r.stopping.Store(true) }
func (r *fakeReader) Lost() bool      { return r.lost.Load() }
func (r *fakeReader) Releasing() bool { return false }
func (r *fakeReader) RaiseDelivered(p consumer.Position) {
	r.raisedMu.Lock()
	defer r.raisedMu.Unlock()
	r.raised = p
}
func (r *fakeReader) Checkpoint() (consumer.Position, bool) {
	return r.acked, r.hasAcked
}
func (r *fakeReader) Progress(time.Time, time.Duration) (consumer.Progress, bool) {
	return consumer.Progress{}, false
}
func (r *fakeReader) Shard() consumer.Shard { return r.shard }
func (r *fakeReader) Log() *service.Logger  { return nil }

func (r *fakeReader) Finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}
