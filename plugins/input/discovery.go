package input

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/coordinator"
	"github.com/connect-kinesis/connect-kinesis/internal/lintrule"
	"github.com/connect-kinesis/connect-kinesis/internal/streams"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// Streams found while the input runs (docs/architecture.md, "Streams found
// at runtime"). With a pattern among `streams`, every instance runs the
// group's discovery every stream_discovery_interval: one instance per
// interval lists the streams (Checkpointer.DiscoverStreams, under the
// group's discovery lease, through a streams.Lister) and publishes them to
// Redis; every instance reads the group's result and makes its consumer
// read exactly the readable streams of it (coordinator.Consumer.Follow),
// in a goroutine of its own so that adding many streams never holds up
// the group's next listing.
// The named streams are read as without patterns.

// streamsFromParsed reads the discovery fields next to the entries of
// `streams`: the consumer is given the names, and follows the streams the
// patterns find.
func streamsFromParsed(conf *service.ParsedConfig, cc *consumer.Config) (streams.Config, error) {
	sc, err := streams.ConfigFromParsed(conf, cc.Streams)
	if err != nil {
		return sc, err
	}
	cc.Streams, cc.FollowStreams = sc.Rules.Names, sc.Rules.Dynamic()
	return sc, nil
}

// streamsLintChecks are the cross-field checks of discovery that the
// constructor makes (streams.Config.Validate, streams.ParseRules), for lint.
func streamsLintChecks() []lintrule.Check {
	isPattern := `s -> s.type() == "string" && (s.contains("*") || s.contains("?"))`
	return []lintrule.Check{
		{
			When:    `this.` + streams.FieldStreamTags + `.or({}).keys().length() > 0 && !this.` + fieldStreams + `.or([]).any(` + isPattern + `)`,
			Message: `"field ` + streams.FieldStreamTags + `: tags select among the streams a pattern of ` + fieldStreams + ` finds, and ` + fieldStreams + ` has none; add a pattern, e.g. \"*\" for every stream with these tags"`,
		},
		{
			When:    `this.` + streams.FieldDiscoveryInterval + `.or("` + streams.DefaultDiscoveryInterval.String() + `").parse_duration().catch(` + strconv.FormatInt(int64(streams.DefaultDiscoveryInterval), 10) + `) < ` + strconv.FormatInt(int64(streams.MinDiscoveryInterval), 10),
			Message: `"field ` + streams.FieldDiscoveryInterval + `: %s is shorter than ` + streams.MinDiscoveryInterval.String() + `; ListStreams allows 5 calls per second for the whole account".format(this.` + streams.FieldDiscoveryInterval + `)`,
		},
	}
}

// followStreams starts the session's discovery when `streams` holds a
// pattern; session.stop tells it to end as the consumer stops.
func (k *kinesisInput) followStreams(s *session, api streams.API) {
	if !k.conf.Consumer.FollowStreams {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	done := make(chan struct{})
	s.endFollow, s.followDone = cancel, done
	lister := streams.NewLister(api, k.conf.Consumer.Backoff)
	// Listing and following run apart: adding many streams (each
	// described, then joined) can take longer than an interval, and the
	// group's listing must not wait for it. The follower takes the latest
	// result; one it had no time for is replaced by the next.
	results := make(chan checkpointer.Discovery, 1)
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case d := <-results:
				k.follow(ctx, s, d)
			}
		}
	})
	wg.Go(func() {
		// The next round is an interval after this one ended, not on a
		// ticker: the group's lease is granted once the last listing
		// (dated when it was published, after the listing's own calls)
		// is an interval old, so a ticker would have the lister ask a
		// little too early, be refused, and the group list every other
		// interval.
		t := time.NewTimer(0)
		defer t.Stop()
		// The group's result as last read: it re-seeds a discovery hash
		// Redis forgot (checkpointer.DiscoverStreamsSeeded).
		var last checkpointer.Discovery
		var nothing noMatch
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if d, ok := k.discoverRound(ctx, s, lister, last); ok {
				nothing.note(k.log, d, k.conf.Streams, time.Now())
				last = d
				select { // only this goroutine sends: drop the unfollowed one
				case <-results:
				default:
				}
				results <- d
			}
			t.Reset(k.conf.Streams.Interval)
		}
	})
	go func() {
		wg.Wait()
		close(done)
	}()
}

// discoverRound runs one round of the group's discovery and returns the
// group's result, ok when there is one to follow. A failed round changes
// nothing: the streams read stay as they are until a round succeeds.
func (k *kinesisInput) discoverRound(ctx context.Context, s *session, lister *streams.Lister, last checkpointer.Discovery) (checkpointer.Discovery, bool) {
	sc := k.conf.Streams
	d, round, err := s.ckpt.DiscoverStreamsSeeded(ctx, s.cons.Owner(), sc.Interval, sc.DeletedRetention, last, func(ctx context.Context) ([]streams.Identity, error) {
		return lister.List(ctx, sc.Rules)
	})
	if err != nil {
		if ctx.Err() == nil {
			k.log.Warnf("Finding the streams matching %s failed; the streams read stay as they are, and the group tries again in %v: %v", strings.Join(sc.Rules.Patterns, ", "), sc.Interval, err)
		}
		return last, false
	}
	if round.Listed {
		k.log.Debugf("Listed the streams for the group: %d match %s", len(d.Listed()), strings.Join(sc.Rules.Patterns, ", "))
	}
	for _, key := range round.Pruned {
		k.log.Infof("Deleted the checkpoints of stream %s, released longer ago than %s (%v)", key, streams.FieldDeletedRetention, sc.DeletedRetention)
	}
	for _, key := range round.Kept {
		k.log.Debugf("Kept the checkpoints of released stream %s past %s: an instance still holds a lease of it or heartbeats; tried again next interval", key, streams.FieldDeletedRetention)
	}
	// With no listing yet (none by the group, or Redis forgot the
	// group's result since) the last result read stays the seed.
	return d, !d.ListedAt.IsZero()
}

// follow makes the consumer read the group's result d.
func (k *kinesisInput) follow(ctx context.Context, s *session, d checkpointer.Discovery) {
	sc := k.conf.Streams
	if err := s.cons.Follow(ctx, foundStreams(d, sc, k.conf.Consumer.StartPosition)); err != nil && ctx.Err() == nil {
		k.log.Warnf("Starting to read a stream found by %s failed; tried again after the next listing: %v", strings.Join(sc.Rules.Patterns, ", "), err)
	}
}

// foundStreams is what the consumer follows of the group's result: its
// readable streams, each starting where new_stream_start_position says
// when it appeared after the group's first listing.
func foundStreams(d checkpointer.Discovery, sc streams.Config, startPosition string) []coordinator.Found {
	var out []coordinator.Found
	for _, ds := range d.Listed() {
		if !ds.Readable() {
			continue
		}
		out = append(out, coordinator.Found{
			Name: ds.Name, Key: ds.Key(), Created: ds.Created,
			Start: sc.StartFor(ds.Appeared, startPosition),
		})
	}
	return out
}
