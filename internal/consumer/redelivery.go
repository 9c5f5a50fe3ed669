package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Redelivery is what the reader does with records the pipeline keeps
// failing (docs/poison-records.md). Its zero value is the behaviour before
// the policy existed: a nacked batch is delivered again, whole, with
// backoff, for as long as it takes. A verdict that names the failed
// records (Batch.AckRecords) narrows a redelivery to them whatever the
// policy says.
type Redelivery struct {
	// MaxAttempts is how many failures charged to a record it may have
	// before it goes to DeadLetter; 0 retries forever.
	MaxAttempts int
	// MaxRecordAge sends a record older than this (by its arrival time),
	// when it would be delivered again, to DeadLetter; 0: no age limit.
	MaxRecordAge time.Duration
	// Isolate halves a batch that failed without naming its records, so
	// that only a record failing alone is charged.
	Isolate bool
	// DeadLetter takes the records that used their attempts or grew too
	// old. It is required when MaxAttempts or MaxRecordAge is set.
	DeadLetter DeadLetter
	// SkipMark turns the redelivery mark off (redelivery.mark: false):
	// readers store nothing before they deliver, and kinesis_redelivered
	// then only marks this instance's deliveries after a failure.
	SkipMark bool
}

// Enabled says records may go to the dead letter.
func (r Redelivery) Enabled() bool {
	return r.DeadLetter != nil && (r.MaxAttempts > 0 || r.MaxRecordAge > 0)
}

// validate checks the ranges, and that a record out of attempts or age has
// somewhere to go: records are never dropped.
func (r Redelivery) validate() error {
	switch {
	case r.MaxAttempts < 0:
		return fmt.Errorf("field redelivery.max_attempts: %d must be 0 (retry forever) or more", r.MaxAttempts)
	case r.MaxRecordAge < 0:
		return fmt.Errorf("field redelivery.max_record_age: %v must be above 0; leave it empty for no age limit", r.MaxRecordAge)
	case (r.MaxAttempts > 0 || r.MaxRecordAge > 0) && r.DeadLetter == nil:
		return errors.New("field redelivery.dead_letter: required with redelivery.max_attempts or redelivery.max_record_age, as a record that used its attempts would have nowhere to go and records are never dropped")
	}
	return nil
}

// Why a record went to the dead letter (DeadRecord.Reason, and the reason
// label of kinesis_input_dead_lettered_total).
const (
	DeadLetterMaxAttempts  = "max_attempts"
	DeadLetterMaxRecordAge = "max_record_age"
)

// DeadRecord is a record that failed for good, as read from Kinesis, with
// what the reader knows of its failures.
type DeadRecord struct {
	Record
	Stream, Shard string
	// Deliveries counts its hand-overs to the pipeline by this instance;
	// Failures the failures charged to it.
	Deliveries, Failures int
	// LastError is the text of the last error it failed with.
	LastError string
	// Reason is DeadLetterMaxAttempts or DeadLetterMaxRecordAge.
	Reason string
	// At is when it failed for good.
	At time.Time
}

// DeadLetter writes records that failed for good. Write returns nil only
// once the records are safely written: only then do they count as done for
// the checkpoint. An error (or ctx ending) leaves them not done; the reader
// retries the write with its backoff while the shard waits.
type DeadLetter interface {
	Write(ctx context.Context, recs []DeadRecord) error
}

// RecordsDelivery is a Delivery that also takes a verdict per record.
type RecordsDelivery interface {
	AckRecords(errs []error)
}

// AckRecords reports the pipeline's verdict per record: errs[i] is the
// error record i failed with, nil when it was processed. Only the failed
// records are delivered again. A slice of another length than the batch's
// records is taken as a failure of the whole batch.
func (b *Batch) AckRecords(errs []error) {
	var first error
	for _, err := range errs {
		if err != nil {
			first = err
			break
		}
	}
	if first == nil && len(errs) == len(b.Records) {
		b.delivery.Ack(nil)
		return
	}
	rd, ok := b.delivery.(RecordsDelivery)
	if !ok || len(errs) != len(b.Records) {
		if first == nil {
			first = fmt.Errorf("the pipeline gave %d verdicts for a batch of %d records", len(errs), len(b.Records))
		}
		b.delivery.Ack(first)
		return
	}
	rd.AckRecords(errs)
}

// Redelivered says this group may have handed record i to the pipeline
// before: this instance delivers it again after a failure, or an earlier
// owner of the shard stored a redelivery mark at or past the record's
// first position (kinesis_redelivered). A KPL aggregate read whole begins
// at its first user record, so a mark inside it marks it: part of it was
// delivered.
func (b *Batch) Redelivered(i int) bool { return b.RedeliveryCause(i) != "" }

// The causes of kinesis_redelivered, as kinesis_input_redelivered_total
// labels them.
const (
	// RedeliveredNack: this instance delivers the record again after the
	// pipeline failed it.
	RedeliveredNack = "nack"
	// RedeliveredMark: an earlier owner of the shard (before a crash, a
	// lost lease or a hand-off), or this instance before its store forgot
	// the group, stored a redelivery mark at or past the record.
	RedeliveredMark = "mark"
)

// RedeliveryCause is why record i is marked redelivered (RedeliveredNack,
// RedeliveredMark), or "" when it is not: Redelivered says the same.
func (b *Batch) RedeliveryCause(i int) string {
	if b.Attempt(i) > 1 {
		return RedeliveredNack
	}
	if !b.DeliveredBefore.IsZero() && firstPosition(&b.Records[i]).Compare(b.DeliveredBefore) <= 0 {
		return RedeliveredMark
	}
	return ""
}

// firstPosition is where record r begins: "<seq>/<subseq>" for a user
// record of a KPL aggregate, "<seq>/0" for a record read whole (a plain
// record, or an aggregate not split). Position is where it ends.
func firstPosition(r *Record) Position {
	return Position{Sequence: r.Sequence, SubSequence: r.SubSequence, HasSub: true}
}

// Attempt is the delivery attempt of record i by this instance: 1 on its
// first hand-over, n on its n-th (kinesis_delivery_attempt).
func (b *Batch) Attempt(i int) int {
	if i < len(b.Attempts) && b.Attempts[i] > 0 {
		return b.Attempts[i]
	}
	return 1
}
