package consumer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// coordinator runs one stream: discovery, the lineage gate, leases and
// balancing, and the readers of the shards this instance holds. Its maps
// are owned by its run goroutine.
type coordinator struct {
	c          *Consumer
	configured string // the name or ARN as the user wrote it
	byARN      bool
	id         string // the checkpoint identity: ARN, or name without one
	streamName string
	retention  time.Duration
	lagWarn    time.Duration
	store      Store
	log        *service.Logger

	runCtx    context.Context
	cancelRun context.CancelFunc

	listed map[string]Shard
	// readers is written by the run goroutine only, under readersMu; the
	// renew goroutine and readerFor read it under readersMu.
	readers   map[string]*shardReader
	readersMu sync.Mutex
	// handedOff remembers when this instance gave a shard away, so it does
	// not take it straight back before the requester could.
	handedOff map[string]time.Time
	// freshChecked is set once the run knows whether the group met this
	// stream before; initialOpen holds the shards open at that first look
	// when it had not (where `latest` means "from now on").
	freshChecked bool
	initialOpen  map[string]bool
	lastRenewOK  time.Time // written by the renew goroutine (and before it starts)

	discoverNow chan struct{}
	readerDone  chan *shardReader
	stopReq     chan struct{}
	stopOnce    sync.Once
	runDone     chan struct{}
}

func newCoordinator(ctx context.Context, c *Consumer, configured string) (*coordinator, error) {
	co := &coordinator{
		c:           c,
		configured:  configured,
		byARN:       strings.HasPrefix(configured, "arn:"),
		listed:      map[string]Shard{},
		readers:     map[string]*shardReader{},
		handedOff:   map[string]time.Time{},
		discoverNow: make(chan struct{}, 1),
		readerDone:  make(chan *shardReader),
		stopReq:     make(chan struct{}),
		runDone:     make(chan struct{}),
	}
	in := &kinesis.DescribeStreamSummaryInput{}
	co.streamParam(&in.StreamName, &in.StreamARN)
	out, err := retryAPI(ctx, co, func(ctx context.Context) (*kinesis.DescribeStreamSummaryOutput, error) {
		return c.api.DescribeStreamSummary(ctx, in)
	})
	if err != nil {
		if kinesisx.ErrorCode(err) == kinesisx.CodeResourceNotFound {
			return nil, fmt.Errorf("stream %s does not exist here: check the streams, region and endpoint fields: %w", configured, err)
		}
		if kinesisx.IsAccessDenied(err) {
			return nil, fmt.Errorf("access to stream %s is denied: check the credentials and region fields and the role's kinesis:DescribeStreamSummary, ListShards, GetShardIterator and GetRecords permissions: %w", configured, err)
		}
		return nil, fmt.Errorf("describing stream %s: %w", configured, err)
	}
	sum := out.StreamDescriptionSummary
	co.streamName = aws.ToString(sum.StreamName)
	if co.streamName == "" {
		co.streamName = configured
	}
	// The ARN is the identity so that a name and an ARN reach the same
	// checkpoints; an emulator without ARNs falls back to the name.
	co.id = aws.ToString(sum.StreamARN)
	if co.id == "" {
		co.id = co.streamName
	}
	co.retention = time.Duration(aws.ToInt32(sum.RetentionPeriodHours)) * time.Hour
	co.lagWarn = c.cfg.LagWarnThreshold
	if co.lagWarn == 0 {
		co.lagWarn = co.retention / 2
	}
	co.store = c.stores(co.id)
	co.log = c.log.With("stream", co.streamName)
	return co, nil
}

// streamParam fills StreamName or StreamARN as the user configured it:
// kinesalite rejects StreamARN, so a name is sent as a name.
func (co *coordinator) streamParam(name, arn **string) {
	if co.byARN {
		*arn = aws.String(co.configured)
	} else {
		*name = aws.String(co.configured)
	}
}

func (co *coordinator) shardEnded() {
	select {
	case co.discoverNow <- struct{}{}:
	default:
	}
}

func (co *coordinator) run(ctx context.Context) {
	co.runCtx, co.cancelRun = context.WithCancel(ctx)
	defer close(co.runDone)
	cfg := &co.c.cfg
	co.lastRenewOK = time.Now()
	co.bounded(co.heartbeat)
	co.discover(co.runCtx)
	co.bounded(co.rebalance)
	disc := time.NewTicker(cfg.DiscoveryInterval)
	defer disc.Stop()
	reb := time.NewTicker(cfg.RebalancePeriod)
	defer reb.Stop()
	renewDone := make(chan struct{})
	go co.renewLoop(renewDone)
	defer func() { <-renewDone }()
	for {
		select {
		case <-co.stopReq:
			return
		case <-co.runCtx.Done():
			return
		case <-disc.C:
			co.discover(co.runCtx)
			co.bounded(co.rebalance)
		case <-co.discoverNow:
			co.discover(co.runCtx)
			co.bounded(co.rebalance)
		case <-reb.C:
			co.bounded(co.rebalance)
		case r := <-co.readerDone:
			if co.readers[r.shard.ID] == r {
				co.readersMu.Lock()
				delete(co.readers, r.shard.ID)
				co.readersMu.Unlock()
			}
			co.c.metrics.owned.Set(int64(len(co.readers)), co.streamName)
			if r.closedShard {
				co.discover(co.runCtx)
			}
			co.bounded(co.rebalance)
		}
	}
}

// bounded runs a Redis step with a deadline of a third of the lease
// period. The loop renews leases between steps, so a hung Redis must not
// hold it longer than that: renewal failures are then seen, and readers
// stopped, before any lease can expire.
func (co *coordinator) bounded(step func(context.Context)) {
	ctx, cancel := context.WithTimeout(co.runCtx, co.c.cfg.LeasePeriod/3)
	defer cancel()
	step(ctx)
}

// shutdown stops the run loop, then every reader gracefully: they stop
// fetching, wait for acks, commit and release. Past ctx, readers are ended.
func (co *coordinator) shutdown(ctx context.Context) {
	co.stopOnce.Do(func() { close(co.stopReq) })
	select {
	case <-co.runDone:
	case <-ctx.Done():
		return
	}
	for _, r := range co.readers {
		r.stop()
	}
	for _, r := range co.readers {
		select {
		case <-r.done:
		case <-ctx.Done():
			r.cancel()
		}
	}
	co.c.metrics.owned.Set(0, co.streamName)
	if err := co.store.RemoveMember(ctx, co.c.owner); err != nil {
		co.log.Debugf("Leaving the group failed; the member entry expires by itself: %v", err)
	}
	co.cancelRun()
}

func (co *coordinator) heartbeat(ctx context.Context) {
	if err := co.store.Heartbeat(ctx, co.c.owner); err != nil {
		co.log.Warnf("Heartbeat failed: %v", err)
	}
}

// discover lists every shard, following NextToken to the end. The listing
// is replaced only when complete, so a failed page never hides a parent.
func (co *coordinator) discover(ctx context.Context) {
	listed := map[string]Shard{}
	in := &kinesis.ListShardsInput{}
	co.streamParam(&in.StreamName, &in.StreamARN)
	for {
		out, err := retryAPI(ctx, co, func(ctx context.Context) (*kinesis.ListShardsOutput, error) {
			return co.c.api.ListShards(ctx, in)
		})
		if err != nil {
			if ctx.Err() == nil {
				co.log.Warnf("Listing shards failed; keeping the previous listing: %v", err)
			}
			return
		}
		for _, s := range out.Shards {
			listed[aws.ToString(s.ShardId)] = shardFrom(s)
		}
		if aws.ToString(out.NextToken) == "" {
			break
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
	co.listed = listed
}

func shardFrom(s types.Shard) Shard {
	sh := Shard{
		ID:       aws.ToString(s.ShardId),
		Parent:   aws.ToString(s.ParentShardId),
		Adjacent: aws.ToString(s.AdjacentParentShardId),
	}
	if s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil {
		sh.Closed = true
	}
	return sh
}

// renewLoop renews on its own goroutine, every third of the lease period,
// so slow discovery or balancing never delays it. Each attempt is bounded by
// a sixth of the period; with mustStop this guarantees that when Redis is
// unreachable the readers stop before the leases' local deadline.
func (co *coordinator) renewLoop(done chan struct{}) {
	defer close(done)
	t := time.NewTicker(co.c.cfg.LeasePeriod / 3)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			ctx, cancel := context.WithTimeout(co.runCtx, co.c.cfg.LeasePeriod/6)
			co.renew(ctx)
			cancel()
		case <-co.stopReq:
			return
		case <-co.runCtx.Done():
			return
		}
	}
}

// renew heartbeats and renews every held lease in one call. When Redis
// stays unreachable for half a lease period, every reader stops before its
// lease could expire and be taken by another instance.
func (co *coordinator) renew(ctx context.Context) {
	defer co.heartbeat(ctx)
	attempt := time.Now()
	var ls []Lease
	byShard := map[string]*shardReader{}
	co.readersMu.Lock()
	current := maps.Clone(co.readers)
	co.readersMu.Unlock()
	for id, r := range current {
		if r.lost.Load() || r.releasing.Load() {
			continue
		}
		ls = append(ls, *r.lease.Load())
		byShard[id] = r
	}
	if len(ls) == 0 {
		co.lastRenewOK = attempt
		return
	}
	renewed, lost, err := co.store.RenewAll(ctx, co.c.owner, ls)
	if err != nil {
		if co.runCtx.Err() != nil {
			return
		}
		if co.mustStop(byShard) {
			co.log.Errorf("Renewing leases failed for %v; stopping %d shard readers before the leases expire: %v", time.Since(co.lastRenewOK).Round(time.Millisecond), len(ls), err)
			for _, r := range byShard {
				r.markLost()
				co.c.metrics.lost.Incr(1, co.streamName)
			}
			return
		}
		co.log.Warnf("Renewing leases failed; retrying: %v", err)
		return
	}
	co.lastRenewOK = attempt
	for _, l := range renewed {
		if r := byShard[l.Shard]; r != nil {
			l := l
			r.lease.Store(&l)
		}
	}
	for _, id := range lost {
		if r := byShard[id]; r != nil && !r.releasing.Load() {
			co.log.With("shard", id).Warn("Lease lost to another instance; stopping the shard reader")
			r.markLost()
			co.c.metrics.lost.Incr(1, co.streamName)
		}
	}
}

// mustStop reports whether the leases could run out before the next
// renewal: the earliest local deadline is within half a lease period.
func (co *coordinator) mustStop(rs map[string]*shardReader) bool {
	var earliest time.Time
	for _, r := range rs {
		if d := r.lease.Load().Deadline; !d.IsZero() && (earliest.IsZero() || d.Before(earliest)) {
			earliest = d
		}
	}
	if earliest.IsZero() {
		earliest = co.lastRenewOK.Add(co.c.cfg.LeasePeriod)
	}
	return time.Until(earliest) <= co.c.cfg.LeasePeriod/2
}

// rebalance takes free ready shards up to the fair share, honours hand-off
// requests from members below theirs, and asks the most loaded member for a
// shard when none is free.
func (co *coordinator) rebalance(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	owner := co.c.owner
	live, err := co.store.LiveMembers(ctx)
	if err != nil {
		co.log.Warnf("Listing live members failed: %v", err)
		return
	}
	members := len(live)
	if !contains(live, owner) {
		members++
	}
	closed, err := co.store.ClosedShards(ctx)
	if err != nil {
		co.log.Warnf("Reading closed shards failed: %v", err)
		return
	}
	leases, err := co.store.Leases(ctx)
	if err != nil {
		co.log.Warnf("Reading leases failed: %v", err)
		return
	}
	if !co.freshChecked && len(co.listed) > 0 {
		cps, err := co.store.Checkpoints(ctx)
		if err != nil {
			co.log.Warnf("Reading checkpoints failed: %v", err)
			return
		}
		co.freshChecked = true
		if len(cps) == 0 && len(closed) == 0 {
			co.initialOpen = map[string]bool{}
			for id, s := range co.listed {
				if !s.Closed {
					co.initialOpen[id] = true
				}
			}
		}
	}
	ready := readyShards(co.listed, closed)
	share := (len(ready) + members - 1) / members
	floor := len(ready) / members
	mine := 0
	for _, r := range co.readers {
		if !r.stopping.Load() {
			mine++
		}
	}

	reqs, err := co.store.HandoffRequests(ctx, owner)
	if err != nil {
		co.log.Warnf("Reading hand-off requests failed: %v", err)
	}
	for _, id := range sortedKeys(reqs) {
		r := co.readers[id]
		if r == nil || r.stopping.Load() || mine <= floor {
			continue
		}
		co.log.With("shard", id).Debugf("Handing the shard over to %s", reqs[id])
		r.stop()
		co.handedOff[id] = time.Now()
		mine--
	}

	for id, at := range co.handedOff {
		if time.Since(at) > 2*co.c.cfg.RebalancePeriod {
			delete(co.handedOff, id)
		}
	}
	took := false
	for _, id := range ready {
		if mine >= share {
			break
		}
		if co.readers[id] != nil {
			continue
		}
		if _, recent := co.handedOff[id]; recent {
			continue
		}
		if ls, held := leases[id]; held && !ls.Expired && ls.Owner != owner {
			continue
		}
		if co.take(ctx, id) {
			mine++
			took = true
		}
	}
	co.c.metrics.owned.Set(int64(len(co.readers)), co.streamName)
	if took || mine >= share {
		return
	}
	// Nothing free: ask the most loaded member for one of its shards.
	counts := map[string][]string{}
	readySet := map[string]bool{}
	for _, id := range ready {
		readySet[id] = true
	}
	for id, ls := range leases {
		if readySet[id] && !ls.Expired && ls.Owner != owner {
			counts[ls.Owner] = append(counts[ls.Owner], id)
		}
	}
	var most string
	for _, m := range sortedKeys(counts) {
		if len(counts[m]) > len(counts[most]) {
			most = m
		}
	}
	if most == "" || len(counts[most])-mine < 2 {
		return
	}
	shards := counts[most]
	sort.Strings(shards)
	shard := shards[len(shards)-1]
	if err := co.store.RequestHandoff(ctx, shard, owner); err != nil {
		co.log.Warnf("Requesting hand-off of shard %s failed: %v", shard, err)
	}
}

// take acquires a shard's lease, reads its checkpoint and starts a reader.
func (co *coordinator) take(ctx context.Context, id string) bool {
	l, err := co.store.Acquire(ctx, id, co.c.owner)
	if err != nil {
		if !errors.Is(err, ErrLeaseHeld) {
			co.log.With("shard", id).Warnf("Acquiring the lease failed: %v", err)
		}
		return false
	}
	pos, ok, err := co.store.Checkpoint(ctx, id)
	if err != nil {
		// Never read a Redis error as "no checkpoint": give the shard back
		// and try again later.
		co.log.With("shard", id).Warnf("Reading the checkpoint failed; not starting the shard: %v", err)
		if err := co.store.Release(ctx, l); err != nil {
			co.log.With("shard", id).Debugf("Releasing the lease failed: %v", err)
		}
		return false
	}
	start, ts := co.c.cfg.StartPosition, co.c.cfg.StartTimestamp
	if !ok {
		o, has, err := co.store.StartOverride(ctx)
		if err != nil {
			co.log.With("shard", id).Warnf("Reading the start override failed; not starting the shard: %v", err)
			if err := co.store.Release(ctx, l); err != nil {
				co.log.With("shard", id).Debugf("Releasing the lease failed: %v", err)
			}
			return false
		}
		if has {
			start, ts = o.Mode, o.Timestamp
		}
	}
	shard := co.listed[id]
	r := newShardReader(co, shard, l, co.startFor(shard, pos, ok, start, ts))
	co.readersMu.Lock()
	co.readers[id] = r
	co.readersMu.Unlock()
	co.c.metrics.taken.Incr(1, co.streamName)
	r.log.Debugf("Took the shard lease (token %d)", l.Token)
	go r.run()
	go func() {
		<-r.done
		select {
		case co.readerDone <- r:
		case <-co.runDone:
		}
	}()
	return true
}

// startFor decides where a newly taken shard starts.
func (co *coordinator) startFor(s Shard, pos Position, ok bool, start string, ts time.Time) startSpec {
	switch {
	case ok && pos.ShardEnd:
		return startSpec{skipClose: true}
	case ok && pos.HasSub:
		return startSpec{iterType: types.ShardIteratorTypeAtSequenceNumber, sequence: pos.Sequence, skipSub: pos.SubSequence, hasSkipSub: true}
	case ok:
		return startSpec{iterType: types.ShardIteratorTypeAfterSequenceNumber, sequence: pos.Sequence}
	}
	switch start {
	case StartAtTimestamp:
		return startSpec{iterType: types.ShardIteratorTypeAtTimestamp, timestamp: ts}
	case StartLatest:
		// `latest` applies to the shards open when the group first meets
		// the stream: they start at LATEST, and shards already closed then
		// are skipped. A shard that opened later (a child of a shard this
		// group read) is read from its start, so nothing written to it is
		// lost.
		if s.Closed {
			return startSpec{skipClose: true}
		}
		if !co.initialOpen[s.ID] && hasListedParent(co.listed, s) {
			return startSpec{iterType: types.ShardIteratorTypeTrimHorizon}
		}
		return startSpec{iterType: types.ShardIteratorTypeLatest}
	}
	return startSpec{iterType: types.ShardIteratorTypeTrimHorizon}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// readerFor returns the current reader of a shard, from any goroutine.
func (co *coordinator) readerFor(shard string) *shardReader {
	co.readersMu.Lock()
	defer co.readersMu.Unlock()
	return co.readers[shard]
}
