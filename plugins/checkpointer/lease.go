package checkpointer

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/redis/go-redis/v9"
)

// Renew extends l by a lease period. ErrLeaseLost when another owner took
// it or it was released; an expired lease nobody took is renewed.
func (s *Store) Renew(ctx context.Context, l consumer.Lease) (consumer.Lease, error) {
	if l.Owner == "" || l.Token == 0 {
		return l, fmt.Errorf("renewing lease for shard %s: no lease held: %w", l.Shard, consumer.ErrLeaseLost)
	}
	sent := time.Now()
	res, err := renewScript.Run(ctx, s.c.client, []string{s.keys.Leases, s.keys.Epoch}, l.Shard, l.Owner, l.Token, s.periodMillis(), s.knownEpoch()).Int64Slice()
	if err != nil {
		return l, storeErr("renewing lease for shard "+l.Shard, err)
	}
	if len(res) != 3 || res[0] != 1 {
		return l, fmt.Errorf("renewing lease for shard %s (token %d): %w", l.Shard, l.Token, consumer.ErrLeaseLost)
	}
	l.ExpiresAt = time.UnixMilli(res[1])
	l.Deadline = sent.Add(time.Duration(res[1]-res[2]) * time.Millisecond)
	return l, nil
}

// RenewAll renews all of owner's leases in one script call, so the cost in
// Redis is per instance, not per shard. It returns the renewed leases and
// the shards whose lease was lost; err is a Redis error, in which case no
// lease is known to be renewed.
func (s *Store) RenewAll(ctx context.Context, owner string, ls []consumer.Lease) (renewed []consumer.Lease, lost []string, err error) {
	if len(ls) == 0 {
		return nil, nil, nil
	}
	args := make([]any, 0, 3+2*len(ls))
	args = append(args, owner, s.periodMillis(), s.knownEpoch())
	for _, l := range ls {
		args = append(args, l.Shard, l.Token)
	}
	sent := time.Now()
	res, err := renewAllScript.Run(ctx, s.c.client, []string{s.keys.Leases, s.keys.Epoch}, args...).Slice()
	if err != nil {
		return nil, nil, storeErr(fmt.Sprintf("renewing %d leases of %s", len(ls), owner), err)
	}
	if len(res) < 2 {
		return nil, nil, fmt.Errorf("renewing %d leases of %s: unexpected script reply %v", len(ls), owner, res)
	}
	renewed, lost = renewedLeases(owner, ls, sent, res)
	return renewed, lost, nil
}

// renewedLeases reads a renewal's reply {expiresAt, now, lostShard...} for
// the leases ls of owner, sent at sent.
func renewedLeases(owner string, ls []consumer.Lease, sent time.Time, res []any) (renewed []consumer.Lease, lost []string) {
	exp, now := toInt(res[0]), toInt(res[1])
	lostSet := make(map[string]bool, len(res)-2)
	for _, v := range res[2:] {
		lostSet[toString(v)] = true
		lost = append(lost, toString(v))
	}
	for _, l := range ls {
		if lostSet[l.Shard] || l.Owner != owner {
			continue
		}
		l.ExpiresAt = time.UnixMilli(exp)
		l.Deadline = sent.Add(time.Duration(exp-now) * time.Millisecond)
		renewed = append(renewed, l)
	}
	return renewed, lost
}

// RenewStreams renews, for each of stores (one per stream), the leases of
// owner given at the same index, in one script call where Redis is not a
// Cluster (renew_streams.lua): an instance renews every stream it reads
// in one call a renewal period. Each answer is RenewAll's for its
// stream. In a Cluster, and for a store of another Checkpointer or kind,
// each stream is renewed on its own (consumer.RenewalsBatcher).
func (s *Store) RenewStreams(ctx context.Context, owner string, stores []consumer.Store, leases [][]consumer.Lease) []consumer.Renewal {
	out := make([]consumer.Renewal, len(stores))
	_, cluster := s.c.client.(*redis.ClusterClient)
	var batch []int
	var keys []string
	args := []any{owner, s.periodMillis()}
	n := 0
	var alone []int
	for i, st := range stores {
		o, ok := st.(*Store)
		if !ok || o.c != s.c || cluster || o.periodMillis() != s.periodMillis() {
			alone = append(alone, i)
			continue
		}
		if len(leases[i]) == 0 {
			continue
		}
		batch, keys = append(batch, i), append(keys, o.keys.Leases, o.keys.Epoch)
		args = append(args, o.knownEpoch(), len(leases[i]))
		for _, l := range leases[i] {
			args = append(args, l.Shard, l.Token)
		}
		n += len(leases[i])
	}
	wait := onTheirOwn(alone, func(i int) {
		r := &out[i]
		r.Renewed, r.Lost, r.Err = stores[i].RenewAll(ctx, owner, leases[i])
	})
	defer wait()
	if len(batch) == 0 {
		return out
	}
	sent := time.Now()
	res, err := renewStreamsScript.Run(ctx, s.c.client, keys, args...).Slice()
	if err == nil && len(res) != len(batch) {
		err = fmt.Errorf("unexpected script reply: %d answers for %d streams", len(res), len(batch))
	}
	for j, i := range batch {
		what := fmt.Sprintf("renewing %d leases of %s", len(leases[i]), owner)
		if err != nil {
			out[i].Err = storeErr(fmt.Sprintf("renewing %d leases of %s in %d streams", n, owner, len(batch)), err)
			continue
		}
		part, _ := res[j].([]any)
		switch {
		case len(part) == 2 && toInt(part[0]) == 0:
			out[i].Err = forgotErr(what, toString(part[1]))
		case len(part) >= 3 && toInt(part[0]) == 1:
			out[i].Renewed, out[i].Lost = renewedLeases(owner, leases[i], sent, part[1:])
		default:
			out[i].Err = fmt.Errorf("%s: unexpected script reply %v", what, part)
		}
	}
	return out
}

var _ consumer.RenewalsBatcher = (*Store)(nil)

// Release gives l up and clears any hand-off request for its shard.
// Releasing a lease already released is not an error; one taken by another
// owner is ErrLeaseLost.
func (s *Store) Release(ctx context.Context, l consumer.Lease) error {
	n, err := releaseScript.Run(ctx, s.c.client, []string{s.keys.Leases, s.keys.Handoff, s.keys.Epoch}, l.Shard, l.Owner, l.Token, s.knownEpoch()).Int64()
	if err != nil {
		return storeErr("releasing lease for shard "+l.Shard, err)
	}
	if n != 1 {
		return fmt.Errorf("releasing lease for shard %s (token %d): %w", l.Shard, l.Token, consumer.ErrLeaseLost)
	}
	return nil
}

// Leases reads every lease, judged against Redis TIME. Released leases are
// included with Owner "" and Expired true.
func (s *Store) Leases(ctx context.Context) (map[string]consumer.LeaseState, error) {
	sent := time.Now()
	res, err := leasesScript.Run(ctx, s.c.client, []string{s.keys.Leases}).Slice()
	if err != nil {
		return nil, fmt.Errorf("reading leases: %w", err)
	}
	return leaseStates(res, sent)
}

// leaseStates reads leases.lua's reply {now, shard, lease value, ...} to a
// call sent at sent.
func leaseStates(res []any, sent time.Time) (map[string]consumer.LeaseState, error) {
	if len(res) < 1 {
		return nil, fmt.Errorf("reading leases: unexpected script reply %v", res)
	}
	now := toInt(res[0])
	out := make(map[string]consumer.LeaseState, (len(res)-1)/2)
	for i := 1; i+1 < len(res); i += 2 {
		shard := toString(res[i])
		owner, exp, tok, ok := ParseLeaseValue(toString(res[i+1]))
		if !ok {
			return nil, fmt.Errorf("reading lease of shard %s: malformed value %q", shard, toString(res[i+1]))
		}
		st := consumer.LeaseState{Lease: consumer.Lease{Shard: shard, Owner: owner, Token: tok, ExpiresAt: time.UnixMilli(exp)}}
		if owner == "" || exp <= now {
			st.Expired = true
		} else {
			st.ExpiresIn = time.Duration(exp-now) * time.Millisecond
			st.Deadline = sent.Add(st.ExpiresIn)
		}
		out[shard] = st
	}
	return out, nil
}

// ReadRound reads what a balancing round needs of the stream in one
// script call (round.lua): the live members, the closed shards (fenced by
// the group record, as ClosedShards), the leases and owner's hand-off
// requests, with the effects of the four calls it replaces
// (consumer.RoundReader).
func (s *Store) ReadRound(ctx context.Context, owner string) (consumer.Round, error) {
	sent := time.Now()
	res, err := roundScript.Run(ctx, s.c.client,
		[]string{s.keys.Members, s.keys.Closed, s.keys.Epoch, s.keys.Leases, s.keys.Handoff},
		s.periodMillis(), s.knownEpoch(), owner, s.handoffMaxAgeMillis()).Slice()
	if err != nil {
		return consumer.Round{}, storeErr("reading the balancing round's state", err)
	}
	if len(res) != 7 {
		return consumer.Round{}, fmt.Errorf("reading the balancing round's state: unexpected script reply %v", res)
	}
	r, err := roundOf(res[:6], sent)
	if err == nil {
		s.noteReseeded(ctx, toInt(res[4]))
		s.noteProvisionalCloses(r.Closed, toString(res[6]))
	}
	return r, err
}

// roundOf reads round.lua's reply, sent at sent.
func roundOf(res []any, sent time.Time) (consumer.Round, error) {
	if len(res) != 6 {
		return consumer.Round{}, fmt.Errorf("reading the balancing round's state: unexpected script reply %v", res)
	}
	members, _ := res[0].([]any)
	closed, _ := res[1].([]any)
	leases, _ := res[2].([]any)
	reqs, _ := res[3].([]any)
	r := consumer.Round{Closed: make(map[string]bool, len(closed)), Handoffs: make(map[string]string, len(reqs)/2)}
	for _, m := range members {
		r.Members = append(r.Members, toString(m))
	}
	slices.Sort(r.Members)
	for _, c := range closed {
		r.Closed[toString(c)] = true
	}
	for i := 0; i+1 < len(reqs); i += 2 {
		r.Handoffs[toString(reqs[i])] = toString(reqs[i+1])
	}
	r.Reopened = reopenedOf(toString(res[5]))
	var err error
	if r.Leases, err = leaseStates(leases, sent); err != nil {
		return consumer.Round{}, err
	}
	return r, nil
}

var _ consumer.RoundReader = (*Store)(nil)

// ParseLeaseValue reads a value of the lease hash,
// "<owner>|<expiresAtMillis>|<token>", taking the numbers from the right as
// the scripts do (the soak reads the hash directly while writes are paused).
func ParseLeaseValue(v string) (owner string, exp, tok int64, ok bool) {
	i := strings.LastIndexByte(v, '|')
	if i < 0 {
		return "", 0, 0, false
	}
	j := strings.LastIndexByte(v[:i], '|')
	if j < 0 {
		return "", 0, 0, false
	}
	var err1, err2 error
	exp, err1 = strconv.ParseInt(v[j+1:i], 10, 64)
	tok, err2 = strconv.ParseInt(v[i+1:], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, 0, false
	}
	return v[:j], exp, tok, true
}
