package reader

import (
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/redpanda-data/benthos/v4/public/service"
)

// Finished reports whether the reader has ended; ClosedShard is then
// final (it is written before Done is closed).
func (r *Reader) Finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// Done is closed once the reader has ended.
func (r *Reader) Done() <-chan struct{} { return r.done }

// Cancel ends the reader at once: shutdown is out of time.
func (r *Reader) Cancel() { r.cancel() }

// Shard is the shard the reader reads.
func (r *Reader) Shard() consumer.Shard { return r.shard }

// Log is the reader's logger, which names its shard.
func (r *Reader) Log() *service.Logger { return r.log }

// Lease is the lease the reader reads under, as last renewed.
func (r *Reader) Lease() consumer.Lease { return *r.lease.Load() }

// Lost says the lease was lost: the reader commits nothing more.
func (r *Reader) Lost() bool { return r.lost.Load() }

// Stopping says the reader was asked to stop, or its lease was lost.
func (r *Reader) Stopping() bool { return r.stopping.Load() }

// Releasing says the lease is being released or the shard closed:
// renewals leave the lease alone from then on.
func (r *Reader) Releasing() bool { return r.releasing.Load() }

// Checkpoint is the highest contiguously acked position; ok false when
// nothing was acked yet.
func (r *Reader) Checkpoint() (pos consumer.Position, ok bool) {
	pos, _, ok = r.tracker.checkpoint()
	return pos, ok
}

// Outcome is how a reader ended; read it once Done is closed.
type Outcome struct {
	// ClosedShard: the shard was read to its end and closed.
	ClosedShard bool
	// StreamGone: the stream was deleted, or deleted and created again.
	StreamGone bool
	// Released: a hand-back committed and released the lease.
	Released bool
	// Unacked is how many records the hand-back left past the committed
	// checkpoint, and UnackedCause why it did not wait for them.
	Unacked      int
	UnackedCause UnackedCause
}

// UnackedCause says why a hand-back left records unacknowledged: the stop's
// line must not say it waited lease.handoff_timeout when it did not.
type UnackedCause int

const (
	// UnackedTimeout: they were not acknowledged within
	// lease.handoff_timeout.
	UnackedTimeout UnackedCause = iota
	// UnackedNacked: a batch was nacked; a reader that is handing its
	// shard back does not deliver it again, so waiting could not help.
	UnackedNacked
	// UnackedEnded: the reader had to end (the stop's time was up)
	// before they were acknowledged.
	UnackedEnded
)

// Outcome says how the reader ended; valid once Done is closed.
func (r *Reader) Outcome() Outcome {
	return Outcome{ClosedShard: r.closedShard, StreamGone: r.streamGone, Released: r.released, Unacked: r.unacked, UnackedCause: r.unackedCause}
}

// Progress is what the reader publishes of its progress with each
// renewal: ok false before its first answer. Each call measures the rate
// of bytes delivered since the previous one, as a moving average over
// periods of length period.
func (r *Reader) Progress(now time.Time, period time.Duration) (consumer.Progress, bool) {
	p, ok := r.progress.snapshot()
	if ok {
		p.BytesPerSecond = r.progress.rate(now, period)
	}
	return p, ok
}
