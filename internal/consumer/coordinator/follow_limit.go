package coordinator

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// How Follow adds many streams at once. Every stream added joins its
// group's state in Redis and lists its shards, and is described once for
// its retention after it started (newFoundCoordinator, describeRetention);
// one after another, 100 new streams took minutes on an emulator under
// load (plugins/input TestIntegrationManyStreamsFoundAndLeased), and
// the instance's discovery, waiting for Follow, did not list meanwhile.
// Adds run followAddConcurrency at a time, and the describes of the whole
// process share one limiter: DescribeStreamSummary is limited per account
// (20/s), and every instance of a group describes every new stream. A
// process with several inputs (or tests running several instances) shares
// it, as they share the account. Each instance adds in an order of its own
// (addOrder).
const followAddConcurrency = 4

// describePermits paces the DescribeStreamSummary calls of stream adds
// and re-creation checks (kinesisx.Pace), as streams.Lister paces its own.
// The lister keeps its own limiter: it describes only where ListStreams
// gives names alone (the emulators), and at 100 streams every 5 s that
// takes the whole budget; shared, it held the adds back, and the adds the
// listing (listing to found took 1m44 s at p95 in
// TestIntegrationManyStreamsFoundAndLeased). Every Consumer of the
// process uses it (Consumer.describes); a test in a synctest bubble gives
// its consumers paces of their own, made in the bubble.
var describePermits = kinesisx.NewPace(kinesisx.MaxDescribeStreamSummaryPerSecond)

// acquireDescribe waits for the process's next DescribeStreamSummary
// permit, or for ctx to end.
func (c *Consumer) acquireDescribe(ctx context.Context) error {
	p := c.describes
	if p == nil { // a Consumer not made by New (a test's)
		p = describePermits
	}
	if err := p.Wait(ctx); err != nil {
		return fmt.Errorf("waiting for a DescribeStreamSummary permit (%d/s for the process): %w", kinesisx.MaxDescribeStreamSummaryPerSecond, err)
	}
	return nil
}

// addOrder is found rotated to start at a place of the instance's own
// (a hash of owner): every instance of the group adds the same new
// streams, and a stream's shards are leased once its first instance has
// added it. In the same order, the last stream waits for the adds of all
// the others at every instance; rotated, the instances start in different
// places and every stream is added early by one of them.
func addOrder(found []Found, owner string) []Found {
	if len(found) < 2 {
		return found
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(owner))
	at := int(h.Sum32() % uint32(len(found)))
	return append(append(make([]Found, 0, len(found)), found[at:]...), found[:at]...)
}
