package producer

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/failsafe-go/failsafe-go"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// putResult is what one PutRecords attempt leaves: how many entries are
// still refused and their codes (for retry metrics and logs).
type putResult struct {
	failed int
	codes  map[string]int
	sample string // one refusal, for the log
}

// requestOutcome is what became of a request.
type requestOutcome struct {
	// failed holds the records that failed for good, and err the error of
	// the first of them.
	failed records
	err    error
	// resend is the entries of aggregates that landed on a shard holding
	// only some of their members, to be sent again.
	resend []int
}

// send writes one request, retrying refused entries and retryable errors
// under the policy, and reports what failed for good through fail.
func (p *Producer) send(ctx context.Context, req records, fail func(int, error)) (result requestOutcome) {
	pending := req
	attempts := 0

	_, err := failsafe.With(p.policy).WithContext(ctx).Get(func() (putResult, error) {
		attempts++
		// The SDK only reads the entries, so the request shares them.
		in := &kinesis.PutRecordsInput{Records: pending.entries}
		if p.conf.StreamARN != "" {
			in.StreamARN = aws.String(p.conf.StreamARN)
		} else {
			in.StreamName = aws.String(p.conf.StreamName)
		}

		start := time.Now()
		out, err := p.api.PutRecords(ctx, in, kinesisx.WithRecordsCodec)
		p.mLatency.Timing(time.Since(start).Nanoseconds(), p.streamLabel())
		if err != nil {
			return putResult{failed: pending.len(), codes: map[string]int{kinesisx.ErrorCode(err): pending.len()}, sample: err.Error()}, err
		}
		if len(out.Records) != pending.len() {
			// Without one result per entry nothing can be matched up; do
			// not guess which records landed.
			return putResult{}, fmt.Errorf("PutRecords answered %d results for %d records", len(out.Records), pending.len())
		}

		var (
			refused         records
			res             putResult
			written, nbytes int
		)
		for k, r := range out.Records {
			if r.ErrorCode == nil || *r.ErrorCode == "" {
				if p.misplaced(ctx, &pending, k, aws.ToString(r.ShardId)) {
					pending.each(k, func(i int) { result.resend = append(result.resend, i) })
					continue
				}
				written += pending.count(k)
				nbytes += pending.size(k)
				continue
			}
			code, msg := aws.ToString(r.ErrorCode), aws.ToString(r.ErrorMessage)
			refused.add(&pending, k, &RecordError{Code: code, Message: msg})
			if res.codes == nil {
				res.codes = map[string]int{}
				res.sample = code + ": " + msg
			}
			res.codes[code]++
		}
		p.mRecords.Incr(int64(written), p.streamLabel())
		p.mBytes.Incr(int64(nbytes), p.streamLabel())
		pending = refused
		res.failed = refused.len()
		return res, nil
	})

	if err != nil {
		err = fmt.Errorf("writing %d records to stream %s after %d attempts: %w", pending.len(), p.streamID(), attempts, err)
		p.log.With("stream", p.streamID(), "records", pending.len()).Errorf("Records failed for good: %v", err)
		for k := range pending.len() {
			pending.each(k, func(i int) { fail(i, err) })
		}
		result.failed, result.err = pending, err
		return result
	}
	if pending.len() == 0 {
		return result
	}
	first := pending.refusals[0]
	p.log.With("stream", p.streamID(), "records", pending.len(), "attempts", attempts).
		Errorf("Kinesis refused records until the retry budget ran out, last: %s: %s", first.Code, first.Message)
	for k := range pending.len() {
		re := pending.refusals[k]
		re.Attempts = attempts
		pending.each(k, func(i int) { fail(i, re) })
	}
	result.failed, result.err = pending, first
	return result
}

// sendAll sends requests in parallel, up to MaxInFlight across the
// producer, and returns what became of each. When ctx ends while it waits
// for a slot, the requests not sent yet fail with ctx's error, each
// outcome names them as failed (so an ordered write fails their keys, as
// for records that failed in flight), and sentAll is false.
func (p *Producer) sendAll(ctx context.Context, requests []records, fail func(int, error)) (results []requestOutcome, sentAll bool) {
	results = make([]requestOutcome, len(requests))
	var wg sync.WaitGroup
	defer wg.Wait()
	for n, req := range requests {
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			for j, r := range requests[n:] {
				for k := range r.len() {
					r.each(k, func(i int) { fail(i, ctx.Err()) })
				}
				results[n+j] = requestOutcome{failed: r, err: ctx.Err()}
			}
			return results, false
		}
		if n == len(requests)-1 {
			// The last (usually the only) request goes out from this
			// goroutine, whose stack is already grown for the SDK.
			results[n] = p.send(ctx, req, fail)
			<-p.slots
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-p.slots }()
			results[n] = p.send(ctx, req, fail)
		}()
	}
	return results, true
}
