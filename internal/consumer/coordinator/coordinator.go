package coordinator

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/failsafe-go/failsafe-go"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/reader"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
)

// coordinator runs one stream: discovery (discovery.go), the lineage gate
// (lineage.go), leases (leases.go), balancing and hand-off (balance.go,
// handoff.go), start positions (start.go), and the readers of the shards
// this instance holds (reader.go). This file holds its run loop. Its maps
// are owned by the run goroutine.
type coordinator struct {
	c          *Consumer
	api        consumer.KinesisAPI // counts throttled calls
	configured string              // the name or ARN as the user wrote it
	id         string              // the checkpoint identity: ARN, or name without one
	streamName string
	// sharedBeat is set while the consumer's shared rounds heartbeat this
	// stream (groupwatch.go), so that renewals do not; sharedRenew while
	// they renew its leases and publish its progress, so that renewLoop's
	// ticker does not.
	sharedBeat, sharedRenew atomic.Bool
	// sharedRound is set while the shared rounds read this stream's
	// balancing round with the others' (groupwatch.go), so that the run
	// loop's ticker does not read its own; rounds carries each read.
	sharedRound atomic.Bool
	rounds      chan roundRead
	// thresholds are the lag thresholds from the stream's retention; a
	// stream found by discovery learns its retention after it started
	// (describeLater), so readers read them through an atomic.
	thresholds atomic.Pointer[lagThresholds]
	// describeLater: the stream was started from what discovery found
	// (name, ARN, creation time) without a DescribeStreamSummary; the run
	// loop describes it for its retention, off the path to its leases.
	describeLater bool
	// start is where shards without a checkpoint start: start_position,
	// or for a stream found while the group runs what
	// new_stream_start_position says (follow.go).
	start string
	// found: added by Consumer.Follow (a pattern found it), not named.
	found bool
	store consumer.Store
	log   *service.Logger
	// fanOut is the stream consumer shards are read through with enhanced
	// fan-out (efo_resolve.go); nil when polling.
	fanOut *source.StreamConsumer
	// listRetry retries each ListShards page; built once.
	listRetry failsafe.Policy[*kinesis.ListShardsOutput]

	runCtx    context.Context
	cancelRun context.CancelFunc
	// rs is what the readers are given (readerStream), built at the
	// first take, once the run loop set runCtx.
	rs *reader.Stream

	listed map[string]consumer.Shard
	// listingFresh is set by a complete listing and cleared by the prune
	// that follows it; unlistedSince is when each shard with entries
	// left was first found absent from the listing (prune.go).
	listingFresh  bool
	listedOnce    bool // a complete listing was made (discover's changed)
	unlistedSince map[string]time.Time
	// readers is written by the run goroutine only, under readersMu; the
	// renew goroutine and readerFor read it under readersMu.
	readers   map[string]shardReader
	readersMu sync.Mutex
	// handedOff remembers when this instance gave a shard away, so it does
	// not take it straight back before the requester could.
	handedOff map[string]time.Time
	// freeSince holds, for each ready shard the last balancing round found
	// free and did not take, since when the rounds have found it free: a
	// round takes those free a balancing period and a half beyond this
	// instance's quota, up to the rounded-up share, so a shard the member
	// it fell to does not take is not left unowned.
	freeSince map[string]time.Time
	// asked, moved and lastOwner are balancing by load's memory (load.go):
	// the shards this instance asked for and when, when each shard was
	// last seen changing hands (its cool-down), and who held it.
	asked, moved map[string]time.Time
	lastOwner    map[string]string
	// readySeen are the shards the last balancing round found ready, so
	// that the next one says which children its parents' close made ready
	// (roundlog.go); nil before a round saw a listing.
	readySeen map[string]bool
	// renewal is when renewals last succeeded and re-seeds last ran (leases.go).
	renewal renewalState
	// missingSince is when discovery first found the stream deleted (zero
	// while it exists); missingLogged when that was last logged.
	missingSince, missingLogged time.Time
	// created is the creation time of the stream this instance reads
	// (zero when the endpoint gives none); createdRecorded is set once the
	// store compared it with the group's; recheck asks discovery to
	// describe the stream again and compare, after the stream was missing
	// (recreated.go).
	created                  time.Time
	createdRecorded, recheck bool
	// createdSeen mirrors created (Unix nanoseconds, 0 when unknown) for
	// the readers, which re-check it when Kinesis does not find a shard
	// that is still listed (recreatedSince).
	createdSeen atomic.Int64

	// known is what this instance knows of the group's state, to re-seed
	// a store that forgot it (reseed.go).
	known known
	// lastRead is when each shard's last GetRecords in this process was
	// answered, so that a new reader of a shard read here before keeps the
	// pace (firstRead).
	lastRead sync.Map // shard id -> time.Time
	// forgot wakes the renew goroutine to re-seed the store.
	forgot chan struct{}
	// takeAfter is when this instance may take its first shard (Join).
	takeAfter time.Time

	discoverNow chan struct{}
	readerDone  chan shardReader
	stopReq     chan struct{}
	stopOnce    sync.Once
	runDone     chan struct{}
	// giveUp is closed when shutdown's time ran out before the run loop
	// ended: the run (its readers and renewals with it) is then cancelled,
	// so nothing of it goes on after the stop returned.
	giveUp     chan struct{}
	giveUpOnce sync.Once
	// renewStop ends the renewals, which outlive the run loop: at shutdown
	// they go on until every reader has drained, committed and released.
	renewStop chan struct{}
	renewDone chan struct{}
}

// requestDiscovery asks the run loop to list the shards now rather than at
// the next discovery tick: a shard ended, so its children are to be found.
func (co *coordinator) requestDiscovery() {
	select {
	case co.discoverNow <- struct{}{}:
	default:
	}
}

func (co *coordinator) run(ctx context.Context) {
	co.runCtx, co.cancelRun = context.WithCancel(ctx)
	defer close(co.runDone)
	go func() {
		select {
		case <-co.giveUp:
			co.cancelRun()
		case <-co.runCtx.Done():
		}
	}()
	defer co.c.tally.drop(co.id)
	// Only the run loop's balancing rounds set the stream's unowned
	// gauge (unowned.go). A stream this instance stops reading (a stop,
	// or a followed stream released) must not keep the last round's
	// value, or an alert on it fires for good for a stream nobody is
	// meant to read here.
	defer co.c.metrics.Unowned.Set(0, co.streamName)
	cfg := &co.c.cfg
	co.renewal.succeeded(time.Now())
	if co.describeLater {
		go co.describeRetention(co.runCtx)
	}
	co.bounded(co.heartbeat)
	co.discover(co.runCtx)
	co.bounded(co.rebalance)
	disc := time.NewTicker(cfg.DiscoveryInterval)
	defer disc.Stop()
	reb := time.NewTicker(cfg.RebalancePeriod)
	defer reb.Stop()
	go co.renewLoop()
	joined := time.NewTimer(time.Until(co.takeAfter))
	defer joined.Stop()
	for {
		// A stop asked for while a step ran ends the loop before any
		// other step: select picks among ready cases at random.
		if co.shuttingDown() {
			return
		}
		select {
		case <-co.stopReq:
			return
		case <-co.runCtx.Done():
			return
		case <-disc.C:
			// With the shared rounds, a listing that changed nothing
			// waits for the next one (within a balancing period).
			if co.discover(co.runCtx) || !co.sharedRound.Load() {
				co.bounded(co.rebalance)
			}
		case <-co.discoverNow:
			co.discover(co.runCtx)
			co.bounded(co.rebalance)
		case <-reb.C:
			if !co.sharedRound.Load() {
				co.bounded(co.rebalance)
			}
		case sr := <-co.rounds:
			if time.Since(sr.at) < cfg.RebalancePeriod {
				co.bounded(func(ctx context.Context) { co.balanceWith(ctx, sr.round, sr.err) })
			}
		case <-joined.C:
			co.bounded(co.rebalance)
		case r := <-co.readerDone:
			co.forgetReader(r)
			if r.Outcome().ClosedShard || r.Outcome().StreamGone {
				co.discover(co.runCtx)
			}
			co.bounded(co.rebalance)
		}
	}
}

// forgetReader drops a reader that has finished.
func (co *coordinator) forgetReader(r shardReader) {
	if r.Outcome().ClosedShard {
		co.known.closed(r.Shard().ID, r.Lease().Token)
	}
	if r.Outcome().StreamGone {
		co.recheck = true
	}
	if co.readers[r.Shard().ID] == r {
		if !r.Outcome().ClosedShard {
			co.known.gaveUp(r.Shard().ID)
		}
		co.readersMu.Lock()
		delete(co.readers, r.Shard().ID)
		co.readersMu.Unlock()
	}
	co.c.metrics.Owned.Set(int64(len(co.readers)), co.streamName)
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

// stopLost stops the readers of leases a renewal found lost. It says
// another instance took a lease only when the store names that instance:
// a lease may also have expired and been released, or vanished with a
// store that forgot it.
func (co *coordinator) stopLost(ctx context.Context, byShard map[string]shardReader, lost []string) {
	var stopping []shardReader
	for _, id := range lost {
		if r := byShard[id]; r != nil && !r.Releasing() {
			stopping = append(stopping, r)
		}
	}
	if len(stopping) == 0 {
		return
	}
	// Who holds the leases is read before the readers stop: once a reader
	// ended, this instance may take its shard again, and the lease would
	// name this instance under a newer token, whatever took it first. A
	// fenced reader can deliver nothing past the redelivery mark its
	// successor read (the mark's writes are fenced too), and its commits
	// fail, so the round trip costs at most a duplicate.
	leases, err := co.store.Leases(ctx)
	for _, r := range stopping {
		r.MarkLost()
		log := r.Log()
		switch holder := leases[r.Shard().ID]; {
		case err != nil:
			log.Warnf("Lease no longer ours in the store (reading who holds it failed: %v); stopped the shard reader", err)
		case holder.Owner != "" && holder.Owner != co.c.owner:
			co.known.newerOwner(r.Shard().ID, r.Lease().Token)
			log.Warnf("Lease taken by instance %s (token %d); stopped the shard reader", holder.Owner, holder.Token)
		case holder.Owner == "" && holder.Token == 0:
			log.Warn("Lease missing from the store (pruned as trimmed while this instance could not renew it, or the group deleted with `checkpoints delete`?); stopped the shard reader")
		case holder.Owner == "" && holder.ExpiresAt.UnixMilli() == 0:
			// Only an operator's reset or import, or the clear of a stream
			// found deleted and created again (checkpointer.StreamCreated),
			// frees a lease this way (released at time 0 with its token
			// bumped); a release or an expiry keeps a real time. The
			// position this instance reached is no longer the shard's: a
			// re-seed must not write it over the new one. The log names
			// both causes: soak seed 12 with efo saw this line after a
			// recreated stream's clear, where it named only the operator.
			co.known.newerOwner(r.Shard().ID, r.Lease().Token)
			log.Warnf("Lease fenced: the stream's checkpoints were replaced and every lease freed (token now %d), by an operator's `checkpoints reset` or `checkpoints import`, or by an instance that found the stream deleted and created again; stopped the shard reader, and the shard is taken again from the new checkpoints", holder.Token)
		default:
			co.known.newerOwner(r.Shard().ID, r.Lease().Token)
			log.Warn("Lease no longer ours in the store (it expired and was released or renewed under another token); stopped the shard reader")
		}
	}
}

// readersNow returns a copy of the current readers, from any goroutine.
func (co *coordinator) readersNow() map[string]shardReader {
	co.readersMu.Lock()
	defer co.readersMu.Unlock()
	return maps.Clone(co.readers)
}

// readerFor returns the current reader of a shard, from any goroutine.
func (co *coordinator) readerFor(shard string) shardReader {
	co.readersMu.Lock()
	defer co.readersMu.Unlock()
	return co.readers[shard]
}
