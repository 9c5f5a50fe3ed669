package checkpointer

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
)

// ReadRounds reads the balancing round of each of stores (one per stream),
// in one script call where Redis is not a Cluster (rounds.lua): an
// instance reading a hundred streams then reads their rounds in one call
// a balancing period, not a hundred. Each answer is ReadRound's for its
// stream, ErrStoreForgot for that stream alone; with loads, each round
// carries the shards' published loads too (ShardLoads, in the same call). In a Cluster, and for a
// store of another Checkpointer or kind, each stream reads its own round
// (at once, onTheirOwn) (consumer.RoundsReader).
func (s *Store) ReadRounds(ctx context.Context, owner string, stores []consumer.Store, loads bool) ([]consumer.Round, []error) {
	rounds, errs := make([]consumer.Round, len(stores)), make([]error, len(stores))
	_, cluster := s.c.client.(*redis.ClusterClient)
	var batch, alone []int
	var keys []string
	withLoads := ""
	if loads {
		withLoads = "1"
	}
	args := []any{s.periodMillis(), owner, withLoads, s.handoffMaxAgeMillis()}
	for i, st := range stores {
		o, ok := st.(*Store)
		if !ok || o.c != s.c || cluster || o.periodMillis() != s.periodMillis() {
			alone = append(alone, i)
			continue
		}
		batch = append(batch, i)
		keys = append(keys, o.keys.Members, o.keys.Closed, o.keys.Epoch, o.keys.Leases, o.keys.Handoff, o.keys.Progress)
		args = append(args, o.knownEpoch())
	}
	wait := onTheirOwn(alone, func(i int) {
		if rr, ok := stores[i].(consumer.RoundReader); ok {
			rounds[i], errs[i] = rr.ReadRound(ctx, owner)
			if errs[i] == nil && loads {
				// A round whose loads could not be read still stands,
				// without them: its balancing reads them again under a
				// deadline of its own, and balances by count this round
				// if that fails too. Failing the round for them dropped
				// every balancing round of a member whose progress hash
				// (a field per shard) took longer to read than the
				// round's deadline: at 10,000 shards on a loaded Cluster,
				// a member holding twice its share kept it for 30 s.
				if l, err := stores[i].ShardLoads(ctx); err == nil {
					if l == nil {
						l = map[string]consumer.ShardLoad{} // read: none published
					}
					rounds[i].Loads = l
				}
			}
			return
		}
		errs[i] = fmt.Errorf("reading the balancing round's state: a %T reads no round", stores[i])
	})
	defer wait()
	if len(batch) == 0 {
		return rounds, errs
	}
	sent := time.Now()
	res, err := roundsScript.Run(ctx, s.c.client, keys, args...).Slice()
	if err == nil && len(res) != len(batch) {
		err = fmt.Errorf("unexpected script reply: %d answers for %d streams", len(res), len(batch))
	}
	for j, i := range batch {
		if err != nil {
			errs[i] = storeErr(fmt.Sprintf("reading the balancing rounds of %d streams", len(batch)), err)
			continue
		}
		part, _ := res[j].([]any)
		switch {
		case len(part) == 2 && toInt(part[0]) == 0:
			errs[i] = forgotErr("reading the balancing round's state", toString(part[1]))
		case len(part) == 9 && toInt(part[0]) == 1:
			rounds[i], errs[i] = roundOf(part[1:7], sent)
			if errs[i] == nil {
				stores[i].(*Store).noteReseeded(ctx, toInt(part[5]))
				stores[i].(*Store).noteProvisionalCloses(rounds[i].Closed, toString(part[8]))
			}
			if errs[i] == nil && loads {
				rounds[i].Loads, errs[i] = loadsFrom(part[7])
			}
		default:
			errs[i] = fmt.Errorf("reading the balancing round's state: unexpected script reply %v", part)
		}
	}
	return rounds, errs
}

var _ consumer.RoundsReader = (*Store)(nil)

// loadsFrom reads the loads from a progress hash as HGETALL gives it.
func loadsFrom(v any) (map[string]consumer.ShardLoad, error) {
	flat, _ := v.([]any)
	raw := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		raw[toString(flat[i])] = toString(flat[i+1])
	}
	ps, err := progressOf(raw)
	if err != nil {
		return nil, err
	}
	return loadsOf(ps), nil
}
