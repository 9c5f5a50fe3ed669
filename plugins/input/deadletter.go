package input

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// Metadata a dead-lettered message carries besides the usual keys.
const (
	MetaDeliveryAttempt  = "kinesis_delivery_attempt"
	MetaRedelivered      = "kinesis_redelivered"
	MetaFailedAttempts   = "kinesis_failed_attempts"
	MetaLastError        = "kinesis_last_error"
	MetaDeadLetterReason = "kinesis_dead_letter_reason"
	MetaDeadLetteredAt   = "kinesis_dead_lettered_at"
	MetaGroup            = "kinesis_group"
)

// deadLetterMessage is the message written for r of group: its data as
// read, with its metadata.
func deadLetterMessage(r consumer.DeadRecord, group string) *service.Message {
	m := service.NewMessage(r.Data)
	m.MetaSetMut(MetaStream, r.Stream)
	m.MetaSetMut(MetaShard, r.Shard)
	m.MetaSetMut(MetaPartitionKey, r.PartitionKey)
	m.MetaSetMut(MetaSequenceNumber, r.Sequence)
	if r.Aggregated {
		m.MetaSetMut(MetaSubSequence, strconv.FormatInt(r.SubSequence, 10))
	}
	m.MetaSetMut(MetaArrival, r.Arrival.UTC().Format(time.RFC3339Nano))
	m.MetaSetMut(MetaDeliveryAttempt, strconv.Itoa(r.Deliveries))
	m.MetaSetMut(MetaFailedAttempts, strconv.Itoa(r.Failures))
	m.MetaSetMut(MetaLastError, r.LastError)
	m.MetaSetMut(MetaDeadLetterReason, r.Reason)
	m.MetaSetMut(MetaDeadLetteredAt, r.At.UTC().Format(time.RFC3339Nano))
	m.MetaSetMut(MetaGroup, group)
	return m
}

// deadLetter writes to the output resource `redelivery.dead_letter` names
// (consumer.DeadLetter). mgr is set once the input is built with its
// resources (newFromParsed).
type deadLetter struct {
	mgr   *service.Resources
	label string
	group string
}

// prepare checks, at Connect, that the label names an output resource,
// and builds the resource there, once: Benthos builds a resource on its
// first access under a read lock only, so two shards dead-lettering their
// first records at once could each build one.
func (d *deadLetter) prepare(ctx context.Context) error {
	if err := (Redelivery{DeadLetter: d.label}).CheckDeadLetter(d.mgr); err != nil {
		return err
	}
	if err := d.mgr.AccessOutput(ctx, d.label, func(*service.ResourceOutput) {}); err != nil {
		return fmt.Errorf("field %s: opening the output resource %q: %w", pathDeadLetter, d.label, err)
	}
	return nil
}

// Write writes records to the dead letter as one batch and returns once
// the output acknowledged them (nil) or failed them, or ctx ended. Only a
// nil return lets the records count as done. The write runs in a goroutine
// of its own: once the resource accepted the batch, ResourceOutput.WriteBatch
// waits for its acknowledgement without its ctx, and while the resource is
// stopping it accepts without sending and waits forever
// (internal/manager/output_wrapper.go in Benthos). A write given up on ctx
// may still land later: the records are then read again by the shard's
// next owner and may reach the dead letter twice, never zero times.
func (d *deadLetter) Write(ctx context.Context, recs []consumer.DeadRecord) error {
	if len(recs) == 0 {
		return nil
	}
	batch := make(service.MessageBatch, len(recs))
	for i, r := range recs {
		batch[i] = deadLetterMessage(r, d.group)
	}
	done := make(chan error, 1)
	go func() {
		var werr error
		aerr := d.mgr.AccessOutput(ctx, d.label, func(o *service.ResourceOutput) {
			werr = o.WriteBatch(ctx, batch)
		})
		done <- errors.Join(aerr, werr)
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("writing %d records to the dead letter %q: %w", len(recs), d.label, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("writing %d records to the dead letter %q: %w", len(recs), d.label, ctx.Err())
	}
}
