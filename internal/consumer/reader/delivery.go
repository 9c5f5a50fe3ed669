package reader

import (
	"context"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/budget"
	"github.com/connect-kinesis/connect-kinesis/internal/kpl"
)

// lagLogInterval rate-limits the lag warnings of one shard.
const lagLogInterval = time.Minute

// directOutlet hands a shard's records to the pipeline in batches of at
// most `limit` (an answer that KPL de-aggregation made longer is handed
// over in several), within shard_max_in_flight, serving redeliveries
// first.
type directOutlet struct {
	r      *Reader
	held   []consumer.Record // fetched, not yet delivered
	behind int64
}

func (o *directOutlet) serve(ctx context.Context) (busy, ok bool) {
	r := o.r
	if b := r.popRedeliver(); b != nil {
		return true, r.redeliverBatch(ctx, b)
	}
	if len(o.held) == 0 || r.tracker.pending() >= r.st.Config.ShardMaxInFlight {
		return false, true
	}
	n := min(len(o.held), r.st.Config.Limit)
	if !r.deliver(ctx, o.held[:n:n], o.behind) {
		return true, false
	}
	// Once all of it is handed over, the answer is the pipeline's: an
	// empty held[n:] would still point at its records (Go keeps the base
	// of a slice cut to zero capacity) and keep them alive while the next
	// answer is fetched, two answers per shard.
	if o.held = o.held[n:]; len(o.held) == 0 {
		o.held = nil
	}
	return true, true
}

func (o *directOutlet) ready() bool {
	return len(o.held) == 0 && o.r.tracker.pending() < o.r.st.Config.ShardMaxInFlight
}

func (o *directOutlet) empty() bool { return len(o.held) == 0 }

func (o *directOutlet) put(recs []consumer.Record, behind int64) { o.held, o.behind = recs, behind }

// deliver hands one batch to the pipeline and registers it with the
// tracker. It hands nothing over past the lease's local deadline: it waits
// for a renewal first. It returns false when ctx ends first; the batch is
// then forgotten, as it never reached the pipeline.
func (r *Reader) deliver(ctx context.Context, recs []consumer.Record, behind int64) bool {
	b := r.newDelivery(recs, behind)
	b.id = r.tracker.addBatch(batchEnd(recs), len(recs))
	b.out, b.at, b.delivered = &b.whole, time.Now(), true
	if !r.handOver(ctx, &b.batch, &b.charge) {
		r.tracker.drop(b.id)
		return false
	}
	r.countDelivered(recs)
	return true
}

// handOver passes b, whose records cost c, to the pipeline
// (coordinator.Consumer.Next), never past the lease's local deadline: it
// waits for a renewal first. It returns false when ctx ends first.
//
// The charge is counted as in the pipeline before the send and taken back
// when the send does not happen: the verdict (an ack, a nack, Admit's
// refusal) may come as soon as the send returns, before this goroutine
// runs again, and it must find the charge where the send put it. A refusal
// noted before the hand-over would leave the batch counted in the pipeline
// while it waits for redelivery, and the reader's close would never give
// it back.
func (r *Reader) handOver(ctx context.Context, b *consumer.Batch, c *budget.Charge) bool {
	for {
		if !r.awaitLease(ctx) {
			return false
		}
		expired, stop := r.deadlineTimer()
		expired = r.holdBeforeSend(ctx, expired)
		r.budget.HandedOver(c)
		select {
		case r.st.Out <- b:
			stop()
			return true
		case <-expired:
			// The pipeline was busy until the lease's deadline passed:
			// wait for a renewal before handing the batch over.
			r.budget.Returned(c)
		case <-ctx.Done():
			stop()
			r.budget.Returned(c)
			return false
		}
	}
}

// countDelivered records a first delivery in the metrics and progress.
func (r *Reader) countDelivered(recs []consumer.Record) {
	var n int64
	for _, rec := range recs {
		n += int64(len(rec.Data))
	}
	r.progress.observeDelivery(time.Now(), n)
	r.st.Metrics.Records.Incr(int64(len(recs)), r.st.Name)
	r.st.Metrics.Bytes.Incr(n, r.st.Name)
}

// deadlineTimer fires at the lease's local deadline; without a deadline it
// never fires.
func (r *Reader) deadlineTimer() (<-chan time.Time, func()) {
	d := r.lease.Load().Deadline
	if d.IsZero() {
		return nil, func() {}
	}
	t := time.NewTimer(time.Until(d))
	return t.C, func() { t.Stop() }
}

// batchEnd is the checkpoint a batch's ack allows: its last record, or,
// when the batch ends inside a KPL aggregate, the last user record of it
// that the batch holds ("<seq>/<subseq>"), so that a restart resumes inside
// the aggregate.
//
// The position outlives the batch (in the ack tracker, the commit, the
// re-seed state), so its sequence number is copied: a record's strings may
// share one allocation with every key and sequence number of its GetRecords
// answer (kinesisx.WithRecordsCodec), which a kept slice of it would hold.
func batchEnd(recs []consumer.Record) consumer.Position {
	last := recs[len(recs)-1]
	seq := strings.Clone(last.Sequence)
	if last.Aggregated && !last.LastOfAggregate {
		return consumer.Position{Sequence: seq, SubSequence: last.SubSequence, HasSub: true}
	}
	return consumer.Position{Sequence: seq}
}

// convert turns Kinesis records into user records, splitting KPL
// aggregates when configured and dropping an aggregate with a user record
// outside the shard's hash key range (hashrange.go).
//
// A checkpoint inside an aggregate resumes AT its sequence number; the
// sub-records up to the checkpoint are dropped. That sequence number occurs
// once in a shard, so the check needs no notion of "first response". A
// record that is not split (deaggregate off, or an aggregate that does not
// decode) is delivered whole even then: the checkpoint covers only part of
// it, and a record is never skipped. A plain record under such a checkpoint
// is skipped: it has no part left to deliver.
func (r *Reader) convert(in []types.Record) []consumer.Record {
	out := make([]consumer.Record, 0, len(in))
	for _, kr := range in {
		seq := aws.ToString(kr.SequenceNumber)
		arrival := aws.ToTime(kr.ApproximateArrivalTimestamp)
		if r.st.Config.Deaggregate && kpl.IsAggregated(kr.Data) {
			subs, err := kpl.Decode(kr.Data)
			if err == nil {
				if stray := r.strayMember(subs); stray >= 0 {
					r.dropStray(seq, subs, stray)
					continue
				}
				for i, s := range subs {
					if r.start.HasSkipSub && seq == r.start.Sequence && int64(i) <= r.start.SkipSub {
						continue
					}
					out = append(out, consumer.Record{PartitionKey: s.PartitionKey, Data: s.Data, Sequence: seq, SubSequence: int64(i), Aggregated: true, Arrival: arrival, LastOfAggregate: i == len(subs)-1})
				}
				continue
			}
			r.log.Warnf("Record %s looks KPL-aggregated but does not decode; delivering it as is: %v", seq, err)
		}
		if r.start.HasSkipSub && seq == r.start.Sequence && !kpl.IsAggregated(kr.Data) {
			// A plain record is its own only sub-record: "<seq>/<n>" on it
			// (as a KCL checkpoint imported with its sub-sequence 0 is)
			// means it was processed.
			continue
		}
		out = append(out, consumer.Record{PartitionKey: aws.ToString(kr.PartitionKey), Data: kr.Data, Sequence: seq, Arrival: arrival})
	}
	return out
}

// lag reports how far behind the shard's tip the reader is: a gauge always,
// a warning past lag_warn_threshold, an error past 90% of the retention.
func (r *Reader) lag(behind int64) {
	st := r.st
	r.srcBehind.Store(behind)
	// A record that keeps failing holds the shard back by its own age,
	// whatever the answers behind it say (gauge.go).
	behind = max(behind, r.blockedMillis())
	r.progress.observeLag(behind)
	st.Metrics.Behind.Set(behind, st.Name, r.shard.ID)
	lag := time.Duration(behind) * time.Millisecond
	var lagWarn, retention time.Duration
	if st.Thresholds != nil {
		lagWarn, retention = st.Thresholds()
	}
	// Without a threshold (no retention known and none configured) only
	// the gauge reports lag.
	if lagWarn <= 0 || lag <= lagWarn || time.Since(r.lastLagLog) < lagLogInterval {
		return
	}
	r.lastLagLog = time.Now()
	if retention > 0 && lag > retention*9/10 {
		r.log.With("lag", lag.String()).Errorf("Shard %s is %v behind, past 90%% of the %v retention: records are about to expire unread", r.shard.ID, lag, retention)
		return
	}
	r.log.With("lag", lag.String()).Warnf("Shard %s is %v behind latest (lag_warn_threshold %v)", r.shard.ID, lag, lagWarn)
}
