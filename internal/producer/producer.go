package producer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// Metric names.
const (
	MetricRecords    = "kinesis_output_records_total"
	MetricBytes      = "kinesis_output_bytes_total"
	MetricRetries    = "kinesis_output_retries_total"
	MetricFailed     = "kinesis_output_failed_total"
	MetricPutLatency = "kinesis_output_put_latency_ns"
)

// API is the part of the Kinesis client the producer uses: PutRecords to
// write, ListShards to map shards for ordering and aggregation.
type API interface {
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
	kinesisx.ListShardsAPI
}

// Config says where and how to write.
type Config struct {
	// StreamName or StreamARN names the stream; exactly one is set. The ARN
	// is only sent when the user configured one, as some emulators reject it.
	StreamName string
	StreamARN  string
	// MaxRecordSize bounds one record, data plus partition key.
	MaxRecordSize int
	// MaxInFlight bounds the PutRecords requests in flight across all
	// writes.
	MaxInFlight int
	// Ordered keeps the records of each partition key in the order of the
	// entries, and across writes in the order the writes began (see
	// Reserve): a partition key at most once per request and in at most one
	// request in flight, and a refused record retried before any later
	// record of its key is sent. Writes may overlap.
	Ordered     bool
	Backoff     kinesisx.Backoff
	Aggregation Aggregation
}

// Aggregation configures KPL aggregation.
type Aggregation struct {
	Enabled bool
	// MaxBytes bounds one aggregated record; records larger than this are
	// sent on their own.
	MaxBytes int
	// MaxRecords bounds the user records in one aggregated record.
	MaxRecords int
}

// RecordError is why an accepted-looking record was finally refused: the
// error code and message of Kinesis' last answer for it.
type RecordError struct {
	Code     string
	Message  string
	Attempts int
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("kinesis refused the record after %d attempts: %s: %s", e.Attempts, e.Code, e.Message)
}

// Producer writes entries to one stream. It is safe for concurrent use.
type Producer struct {
	api    API
	conf   Config
	log    *service.Logger
	policy retrypolicy.RetryPolicy[putResult]
	slots  chan struct{}
	shards atomic.Pointer[ShardMap]
	// refreshing serialises shard map refreshes, so that many records seen
	// on an unexpected shard at once cost one listing.
	refreshing sync.Mutex
	warn       *rateLimitedLogger
	// order sequences overlapping ordered writes by partition key.
	order keyOrder

	mRecords, mBytes, mFailed *service.MetricCounter
	mRetries                  *service.MetricCounter
	mLatency                  *service.MetricTimer
}

// New returns a Producer. log and metrics may come from service.MockResources
// in tests.
func New(api API, conf Config, log *service.Logger, metrics *service.Metrics) *Producer {
	if conf.MaxInFlight < 1 {
		conf.MaxInFlight = 1
	}
	if conf.MaxRecordSize <= 0 {
		conf.MaxRecordSize = kinesisx.DefaultMaxRecordSize
	}
	p := &Producer{
		api:      api,
		conf:     conf,
		log:      log,
		slots:    make(chan struct{}, conf.MaxInFlight),
		warn:     &rateLimitedLogger{log: log, every: 10 * time.Second},
		mRecords: metrics.NewCounter(MetricRecords, "stream"),
		mBytes:   metrics.NewCounter(MetricBytes, "stream"),
		mFailed:  metrics.NewCounter(MetricFailed, "stream"),
		mRetries: metrics.NewCounter(MetricRetries, "stream", "code"),
		mLatency: metrics.NewTimer(MetricPutLatency, "stream"),
	}
	p.policy = kinesisx.RetryBuilder[putResult](conf.Backoff).
		// A response with refused entries is retried like an error; only
		// those entries go out again (the attempt keeps the rest done).
		HandleIf(func(r putResult, err error) bool { return err == nil && r.failed > 0 }).
		OnRetry(p.onRetry).
		Build()
	return p
}

// SetShardMap gives the producer the stream's shards. Aggregation needs them
// to group records by shard, ordering to send each shard's records one
// request at a time. Without a map, records are not aggregated and an
// ordered producer sends one request at a time.
func (p *Producer) SetShardMap(m *ShardMap) { p.shards.Store(m) }

// RefreshShardMap lists the stream's shards and keeps the new map.
func (p *Producer) RefreshShardMap(ctx context.Context) error {
	m, err := LoadShardMap(ctx, p.api, p.streamID())
	if err != nil {
		return err
	}
	p.shards.Store(m)
	return nil
}

// refreshShardMapFrom refreshes the map after a record landed on a shard that
// seen, the map it was grouped by, did not predict. When another write has
// already replaced seen, that newer map is returned without a listing. If the
// listing fails, seen is returned.
func (p *Producer) refreshShardMapFrom(ctx context.Context, seen *ShardMap) *ShardMap {
	p.refreshing.Lock()
	defer p.refreshing.Unlock()
	if cur := p.shards.Load(); cur != seen {
		return cur
	}
	if err := p.RefreshShardMap(ctx); err != nil {
		p.log.With("stream", p.streamID()).Warnf("Refreshing the shard map after a record landed on an unexpected shard: %v", err)
		return seen
	}
	return p.shards.Load()
}

// records is a list of Kinesis records to send, as parallel slices so that
// a request is a sub-slice and costs no copy.
type records struct {
	// src is the entries of the write; index and members point into it.
	src     []Entry
	entries []types.PutRecordsRequestEntry
	// index is the entry a plain record carries, or the first member of an
	// aggregate.
	index []int
	// members is nil without aggregation; otherwise the entries each
	// aggregate carries (nil for plain records).
	members [][]int
	// shards is the map the records were grouped by, nil if none; lane is
	// then the index of the open shard each record is predicted to land on
	// (-1 if the map does not know).
	shards *ShardMap
	lane   []int
	// refusals is Kinesis' last refusal of each record, set on records
	// waiting for a retry.
	refusals []*RecordError
}

func (r *records) len() int { return len(r.entries) }

// size is what Kinesis counts for record k: data plus partition key.
func (r *records) size(k int) int {
	return len(r.entries[k].Data) + len(aws.ToString(r.entries[k].PartitionKey))
}

// count is the number of user records record k carries.
func (r *records) count(k int) int {
	if r.members == nil || r.members[k] == nil {
		return 1
	}
	return len(r.members[k])
}

// each calls fn with the index of every entry record k carries.
func (r *records) each(k int, fn func(int)) {
	if r.members == nil || r.members[k] == nil {
		fn(r.index[k])
		return
	}
	for _, i := range r.members[k] {
		fn(i)
	}
}

// predicted is the id of the shard record k was grouped for, or "".
func (r *records) predicted(k int) string {
	if r.shards == nil || r.lane[k] < 0 {
		return ""
	}
	return r.shards.ranges[r.lane[k]].id
}

func (r *records) slice(from, to int) records {
	s := records{src: r.src, shards: r.shards, entries: r.entries[from:to], index: r.index[from:to]}
	if r.members != nil {
		s.members = r.members[from:to]
	}
	if r.lane != nil {
		s.lane = r.lane[from:to]
	}
	return s
}

// withCap returns an empty list of r's records with room for n.
func (r *records) withCap(n int) records {
	s := records{src: r.src, shards: r.shards, entries: make([]types.PutRecordsRequestEntry, 0, n), index: make([]int, 0, n)}
	if r.members != nil {
		s.members = make([][]int, 0, n)
	}
	if r.lane != nil {
		s.lane = make([]int, 0, n)
	}
	return s
}

// push appends record k of src.
func (r *records) push(src *records, k int) {
	r.src, r.shards = src.src, src.shards
	r.entries = append(r.entries, src.entries[k])
	r.index = append(r.index, src.index[k])
	if src.members != nil {
		r.members = append(r.members, src.members[k])
	}
	if src.lane != nil {
		r.lane = append(r.lane, src.lane[k])
	}
}

// add appends record k of src, refused with refusal.
func (r *records) add(src *records, k int, refusal *RecordError) {
	r.push(src, k)
	r.refusals = append(r.refusals, refusal)
}

// putResult is what one PutRecords attempt leaves: how many entries are
// still refused and their codes (for retry metrics and logs).
type putResult struct {
	failed int
	codes  map[string]int
	sample string // one refusal, for the log
}

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

// write is Write in the place seq holds among ordered writes (nil when
// unordered).
func (p *Producer) write(ctx context.Context, entries []Entry, seq *sequenced) []error {
	var (
		errs []error
		mu   sync.Mutex
	)
	fail := func(i int, err error) {
		mu.Lock()
		defer mu.Unlock()
		if errs == nil {
			errs = make([]error, len(entries))
		}
		errs[i] = err
	}

	valid := make([]int, 0, len(entries))
	for i, e := range entries {
		if err := Validate(e, p.conf.MaxRecordSize); err != nil {
			fail(i, err)
			continue
		}
		valid = append(valid, i)
	}

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

	if errs != nil {
		n := 0
		for _, err := range errs {
			if err != nil {
				n++
			}
		}
		p.mFailed.Incr(int64(n), p.streamLabel())
	}
	return errs
}

// writeUnordered sends the requests of recs concurrently, up to MaxInFlight.
// It returns the entries to send again (see Write).
func (p *Producer) writeUnordered(ctx context.Context, recs *records, fail func(int, error)) []int {
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		resend []int
	)
	requests := pack(recs)
	for n, req := range requests {
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			for k := range req.len() {
				req.each(k, func(i int) { fail(i, ctx.Err()) })
			}
			continue
		}
		run := func() {
			defer func() { <-p.slots }()
			if again := p.send(ctx, req, fail).resend; len(again) > 0 {
				mu.Lock()
				resend = append(resend, again...)
				mu.Unlock()
			}
		}
		if n == len(requests)-1 {
			// The last (usually the only) request goes out from this
			// goroutine, whose stack is already grown for the SDK.
			run()
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			run()
		}()
	}
	wg.Wait()
	return resend
}

// pack splits records, in order, into requests within the PutRecords limits.
func pack(recs *records) []records {
	var (
		requests []records
		from     int
		bytes    int
	)
	for k := range recs.len() {
		size := recs.size(k)
		if k-from == kinesisx.MaxPutRecordsCount || (k > from && bytes+size > kinesisx.MaxPutRecordsBytes) {
			requests = append(requests, recs.slice(from, k))
			from, bytes = k, 0
		}
		bytes += size
	}
	if recs.len() > from {
		requests = append(requests, recs.slice(from, recs.len()))
	}
	return requests
}

// sent is what became of a request.
type sent struct {
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
func (p *Producer) send(ctx context.Context, req records, fail func(int, error)) (result sent) {
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
			still           records
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
			still.add(&pending, k, &RecordError{Code: code, Message: msg})
			if res.codes == nil {
				res.codes = map[string]int{}
				res.sample = code + ": " + msg
			}
			res.codes[code]++
		}
		p.mRecords.Incr(int64(written), p.streamLabel())
		p.mBytes.Incr(int64(nbytes), p.streamLabel())
		pending = still
		res.failed = still.len()
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

// misplaced reports whether record k, accepted on shard landed, is an
// aggregate a KCL reader of that shard would drop: one with a member outside
// the shard's hash range. That happens when the stream was resharded after
// the map the aggregate was grouped by was read. A record on the shard it
// was grouped for is never misplaced, and plain records are readable
// wherever they land.
func (p *Producer) misplaced(ctx context.Context, recs *records, k int, landed string) bool {
	if recs.members == nil || recs.members[k] == nil || landed == "" || landed == recs.predicted(k) {
		return false
	}
	m := p.refreshShardMapFrom(ctx, recs.shards)
	for _, i := range recs.members[k] {
		h, err := entryHashKey(recs.src[i])
		if err != nil {
			return true
		}
		if in, known := m.holds(landed, h); !in || !known {
			return true
		}
	}
	return false
}

func (p *Producer) onRetry(e failsafe.ExecutionEvent[putResult]) {
	r := e.LastResult()
	for code, n := range r.codes {
		p.mRetries.Incr(int64(n), p.streamLabel(), code)
	}
	p.warn.Warnf(p.streamID(), r.failed, r.sample)
}

// streamLabel is the stream's name, the `stream` label of every metric.
func (p *Producer) streamLabel() string { return kinesisx.StreamName(p.streamID()) }

func (p *Producer) streamID() string {
	if p.conf.StreamARN != "" {
		return p.conf.StreamARN
	}
	return p.conf.StreamName
}

// rateLimitedLogger logs retries at warn at most once per interval, with a
// count of those it held back, so a throttled stream does not flood the log.
type rateLimitedLogger struct {
	log        *service.Logger
	every      time.Duration
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (l *rateLimitedLogger) Warnf(stream string, records int, sample string) {
	l.mu.Lock()
	now := time.Now()
	if now.Sub(l.last) < l.every {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := l.suppressed
	l.last, l.suppressed = now, 0
	l.mu.Unlock()
	l.log.With("stream", stream, "records", records, "similar_retries_not_logged", suppressed).
		Warnf("Retrying records Kinesis refused: %s", sample)
}
