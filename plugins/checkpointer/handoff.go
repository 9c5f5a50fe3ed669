package checkpointer

import (
	"context"
	"fmt"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// RequestHandoff asks the holder of shard to hand it over to requester. The
// request lasts until the lease is released or taken, the requester stops
// heartbeating, or it is older than consumer.HandoffRequestMaxAge at the
// balancing period; a newer request replaces it.
func (s *Store) RequestHandoff(ctx context.Context, shard, requester string) error {
	return s.RequestHandoffs(ctx, []string{shard}, requester)
}

// RequestHandoffs asks for each of shards as RequestHandoff does, in one
// round trip (consumer.HandoffRequestsBatcher).
func (s *Store) RequestHandoffs(ctx context.Context, shards []string, requester string) error {
	if len(shards) == 0 {
		return nil
	}
	what := "requesting hand-off of shard " + shards[0]
	if len(shards) > 1 {
		what = fmt.Sprintf("requesting hand-off of %d shards", len(shards))
	}
	args := make([]any, 0, 1+len(shards))
	args = append(args, requester)
	for _, sh := range shards {
		args = append(args, sh)
	}
	if err := requestHandoffScript.Run(ctx, s.c.client, []string{s.keys.Handoff}, args...).Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

var _ consumer.HandoffRequestsBatcher = (*Store)(nil)

// HandoffRequests returns shard -> requester for the live leases owner holds
// that a live member asked for within the request's lifetime.
func (s *Store) HandoffRequests(ctx context.Context, owner string) (map[string]string, error) {
	res, err := handoffRequestsScript.Run(ctx, s.c.client,
		[]string{s.keys.Handoff, s.keys.Leases, s.keys.Members}, owner, s.periodMillis(), s.handoffMaxAgeMillis()).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("reading hand-off requests for %s: %w", owner, err)
	}
	out := make(map[string]string, len(res)/2)
	for i := 0; i+1 < len(res); i += 2 {
		out[res[i]] = res[i+1]
	}
	return out, nil
}

// handoffMaxAgeMillis is how long a hand-off request lasts, in ms
// (consumer.HandoffRequestMaxAge).
func (s *Store) handoffMaxAgeMillis() int64 {
	return consumer.HandoffRequestMaxAge(s.c.cfg.RebalancePeriod).Milliseconds()
}
