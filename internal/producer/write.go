package producer

import (
	"context"
	"slices"
	"sync"
)

// maxAggregatingRounds bounds how often the records of one write are grouped
// into aggregates: a write whose aggregates landed on shards the map did not
// predict is grouped again with a fresh map, and if that happens again (the
// stream is resharding under it) the rest go as plain records, which are
// readable wherever they land.
const maxAggregatingRounds = 2

// Write writes entries and returns nil when all were written, or one error
// per entry (nil for those written). Entries are validated first; an invalid
// one fails alone and is not sent. Records Kinesis accepted are never sent
// again, whatever happens to the others, with one exception: an aggregate
// that landed on a shard holding only some of its members (the stream was
// resharded) is sent again as its members, grouped by the new shards,
// because KCL readers drop such an aggregate whole.
//
// An ordered producer keeps each partition key's records in the order of
// entries, and across writes in the order the writes began: Write is
// Reserve().Write. Writes may overlap; a later write's records of a key an
// earlier write holds wait for that write to end (see sequence.go).
func (p *Producer) Write(ctx context.Context, entries []Entry) []error {
	return p.Reserve().Write(ctx, entries)
}

// outcome is a write's entries, those still to send (valid) and one error
// per entry once one failed (errs, nil until then).
type outcome struct {
	entries []Entry
	valid   []int
	mu      sync.Mutex
	errs    []error
}

// fail notes that entry i failed for good with err; safe for concurrent use.
func (o *outcome) fail(i int, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.errs == nil {
		o.errs = make([]error, len(o.entries))
	}
	o.errs[i] = err
}

// validate fails the entries that can never be written and returns the
// write's outcome so far.
func (p *Producer) validate(entries []Entry) *outcome {
	out := &outcome{entries: entries, valid: make([]int, 0, len(entries))}
	for i, e := range entries {
		if err := Validate(e, p.conf.MaxRecordSize); err != nil {
			out.fail(i, err)
			continue
		}
		out.valid = append(out.valid, i)
	}
	return out
}

// write sends the valid entries of out in the place seq holds among ordered
// writes (nil when unordered).
func (p *Producer) write(ctx context.Context, out *outcome, seq *sequenced) []error {
	entries, valid, fail := out.entries, out.valid, out.fail
	for round := 0; len(valid) > 0; round++ {
		recs := p.records(entries, valid, p.conf.Aggregation.Enabled && round < maxAggregatingRounds)
		if p.conf.Ordered {
			valid = p.writeOrdered(ctx, &recs, seq, fail)
		} else {
			valid = p.writeUnordered(ctx, &recs, fail)
		}
		if len(valid) > 0 {
			// Entry order is the order each key's records must land in.
			slices.Sort(valid)
			p.log.With("stream", p.streamID(), "records", len(valid)).
				Debug("Sending again the members of aggregates that landed on a shard other than their own")
		}
	}

	if errs := out.errs; errs != nil {
		byReason := map[string]int64{}
		for _, err := range errs {
			if err != nil {
				byReason[FailReason(err)]++
			}
		}
		for reason, n := range byReason {
			p.mFailed.Incr(n, p.streamLabel(), reason)
		}
	}
	return out.errs
}

// writeUnordered sends the requests of recs concurrently, up to MaxInFlight.
// It returns the entries to send again (see Write).
func (p *Producer) writeUnordered(ctx context.Context, recs *records, fail func(int, error)) []int {
	outcomes, _ := p.sendAll(ctx, pack(recs), fail)
	var resend []int
	for _, o := range outcomes {
		resend = append(resend, o.resend...)
	}
	return resend
}
