package checkpointer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/redis/go-redis/v9"
	"github.com/redpanda-data/benthos/v4/public/service"
)

// Keys are the Redis keys of one group+stream. They share the hash tag
// {<group>:<stream>}, so every script touching several of them runs on one
// Redis Cluster slot.
type Keys struct {
	Checkpoints, Closed, Leases, Members, Handoff, Epoch string
	// Progress holds what owners publish for operators: per shard its
	// lag, last delivery and owner.
	Progress string
}

// Store reads and changes the checkpoints, leases, closed shards, members
// and hand-off requests of one stream for the group.
type Store struct {
	c        *Checkpointer
	streamID string
	keys     Keys
	log      *service.Logger

	// epoch is the id of the group record this store's caller knows: set by
	// its first take, presented by every mutation, changed by a re-seed.
	epochMu    sync.Mutex
	epoch      string
	groupStart time.Time

	replicas replicaGate
}

func (s *Store) knownEpoch() string {
	s.epochMu.Lock()
	defer s.epochMu.Unlock()
	return s.epoch
}

// learnEpoch adopts the group record a first take joined.
func (s *Store) learnEpoch(id string, start time.Time) {
	s.epochMu.Lock()
	defer s.epochMu.Unlock()
	if s.epoch == "" {
		s.epoch, s.groupStart = id, start
	}
}

// storeErr turns a script's FORGOT reply into ErrStoreForgot.
func storeErr(what string, err error) error {
	var re redis.Error
	if errors.As(err, &re) && strings.HasPrefix(re.Error(), "FORGOT") {
		found := strings.TrimSpace(strings.TrimPrefix(re.Error(), "FORGOT"))
		if found == "" {
			found = "none"
		}
		return fmt.Errorf("%s: the group record is gone or replaced (found %s): %w", what, found, consumer.ErrStoreForgot)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// StreamID is the identity the keys are named after.
func (s *Store) StreamID() string { return s.streamID }

// Keys are the store's Redis keys.
func (s *Store) Keys() Keys { return s.keys }

// The Redis store is the consumer's Store: leases, checkpoints and the
// sentinel errors are the consumer's types.
var _ consumer.Store = (*Store)(nil)

func (s *Store) periodMillis() int64 { return s.c.cfg.LeasePeriod.Milliseconds() }

// Acquire takes a free or expired lease for owner, bumping its fencing
// token, and returns it with the shard's checkpoint, the start override and
// the group's start, in one round trip. The store's first take joins the
// group, creating its record if there is none. A live lease of another
// owner gives ErrLeaseHeld; one the owner already holds is renewed with its
// token unchanged.
func (s *Store) Acquire(ctx context.Context, shard, owner string) (consumer.Take, error) {
	if shard == "" || owner == "" {
		return consumer.Take{}, fmt.Errorf("acquiring lease: shard and owner must be set")
	}
	what := "acquiring lease for shard " + shard
	sent := time.Now()
	res, err := acquireScript.Run(ctx, s.c.client, []string{s.keys.Leases, s.keys.Handoff, s.keys.Checkpoints, s.keys.Epoch},
		shard, owner, s.periodMillis(), s.knownEpoch(), newEpochID()).Slice()
	if err != nil {
		return consumer.Take{}, storeErr(what, err)
	}
	if len(res) != 10 {
		return consumer.Take{}, fmt.Errorf("%s: unexpected script reply %v", what, res)
	}
	s.learnEpoch(toString(res[5]), time.UnixMilli(toInt(res[6])))
	t := consumer.Take{
		Lease:      consumer.Lease{Shard: shard, Owner: toString(res[1]), Token: toInt(res[3]), ExpiresAt: time.UnixMilli(toInt(res[2]))},
		GroupStart: time.UnixMilli(toInt(res[6])),
		Quiet:      time.Duration(toInt(res[9])) * time.Millisecond,
	}
	t.Deadline = sent.Add(time.Duration(toInt(res[2])-toInt(res[4])) * time.Millisecond)
	if toInt(res[0]) != 1 {
		if t.Owner == "" {
			return t, fmt.Errorf("%s: the store was re-seeded; shards it does not know wait until %s for their holders to re-seed them: %w",
				what, t.ExpiresAt.UTC().Format(time.RFC3339Nano), consumer.ErrLeaseHeld)
		}
		return t, fmt.Errorf("%s: held by %s until %s: %w", what, t.Owner, t.ExpiresAt.UTC().Format(time.RFC3339Nano), consumer.ErrLeaseHeld)
	}
	if v := toString(res[7]); v != "" {
		if t.Checkpoint, err = consumer.ParsePosition(v); err != nil {
			return t, fmt.Errorf("%s: reading its checkpoint: %w", what, err)
		}
	}
	if v := toString(res[8]); v != "" {
		o, err := consumer.ParseStartOverride(v)
		if err != nil {
			return t, fmt.Errorf("%s: reading the start override: %w", what, err)
		}
		t.Override = &o
	}
	if t.Checkpoint.IsZero() {
		if t.ShardStart, err = s.shardStart(ctx, shard); err != nil {
			return t, fmt.Errorf("%s: %w", what, err)
		}
	}
	return t, nil
}

// shardStart reads the shard's own start (see shardStartPrefix); nil when
// it has none. It is read apart from the take, and only for a shard without
// a checkpoint, which leaves the acquire script and its reply as they were:
// only an import or reset writes the field, and either fences the lease just
// taken, so a reader that saw a newer value commits nothing from it.
func (s *Store) shardStart(ctx context.Context, shard string) (*consumer.StartOverride, error) {
	v, err := s.c.client.HGet(ctx, s.keys.Checkpoints, shardStartPrefix+shard).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the shard's own start: %w", err)
	}
	o, err := consumer.ParseStartOverride(v)
	if err != nil {
		return nil, fmt.Errorf("reading the shard's own start: %w", err)
	}
	return &o, nil
}

// newEpochID is a random id for a new group record.
func newEpochID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

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
	return renewed, lost, nil
}

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

// Commit stores p as the shard's checkpoint if l is still the current lease.
// A position not after the stored one is a no-op, so the checkpoint never
// moves backwards. ErrLeaseLost when fenced. With replicas to wait for
// (min_replicas_to_ack), the commit is done only once they acknowledged it.
func (s *Store) Commit(ctx context.Context, l consumer.Lease, p consumer.Position) error {
	if l.Owner == "" || l.Token == 0 {
		return fmt.Errorf("committing shard %s: no lease held: %w", l.Shard, consumer.ErrLeaseLost)
	}
	if p.IsZero() {
		return fmt.Errorf("committing shard %s: empty position", l.Shard)
	}
	what := fmt.Sprintf("committing %s for shard %s", p, l.Shard)
	err := s.replicated(ctx, what, func(c redis.Scripter) error {
		n, err := commitScript.Run(ctx, c, []string{s.keys.Leases, s.keys.Checkpoints, s.keys.Epoch},
			l.Shard, l.Owner, l.Token, p.String(), s.knownEpoch()).Int64()
		if err != nil {
			return storeErr(what, err)
		}
		if n == 0 {
			return fmt.Errorf("%s (token %d): %w", what, l.Token, consumer.ErrLeaseLost)
		}
		return nil
	})
	if err != nil {
		s.c.errors.Incr(1)
		return err
	}
	s.c.commits.Incr(1)
	return nil
}

// CloseShard marks the shard fully consumed: checkpoint SHARD_END, the shard
// added to the closed set (which lets its children be read) and the lease
// released. Without replicas to wait for, that is one script. With them it
// is two steps, each acknowledged by the replicas before the next: first
// the fenced SHARD_END checkpoint, then the closed set and the release. A
// failover can then lose at most the second step, and the new owner of the
// shard finds SHARD_END and closes it again without reading it. A step the
// replicas did not acknowledge in time is an error, and the caller retries
// the close. ErrLeaseLost when fenced.
func (s *Store) CloseShard(ctx context.Context, l consumer.Lease) error {
	if l.Owner == "" || l.Token == 0 {
		return fmt.Errorf("closing shard %s: no lease held: %w", l.Shard, consumer.ErrLeaseLost)
	}
	what := "closing shard " + l.Shard
	n, err := s.replicas.want(ctx, s)
	if err == nil && n > 0 {
		err = s.Commit(ctx, l, consumer.Position{ShardEnd: true})
	}
	if err == nil {
		err = s.replicated(ctx, what, func(c redis.Scripter) error {
			n, err := closeScript.Run(ctx, c, []string{s.keys.Leases, s.keys.Checkpoints, s.keys.Closed, s.keys.Handoff, s.keys.Epoch},
				l.Shard, l.Owner, l.Token, s.knownEpoch()).Int64()
			if err != nil {
				return storeErr(what, err)
			}
			if n != 1 {
				return fmt.Errorf("%s (token %d): %w", what, l.Token, consumer.ErrLeaseLost)
			}
			return nil
		})
	}
	if err != nil {
		if errors.Is(err, ErrNotReplicated) {
			s.log.With("shard", l.Shard).Warnf("Closing the shard is not acknowledged by a replica yet; retrying: %v", err)
		}
		s.c.errors.Incr(1)
		return err
	}
	s.c.commits.Incr(1)
	s.log.With("shard", l.Shard).Debug("Shard closed")
	return nil
}

// Reseed writes back what one instance knows into a store that forgot the
// group: the group record this store knows (of two records the one with the
// earlier start wins, so instances that disagree converge), checkpoints
// (only forwards), the start override, closed shards and the instance's
// leases with their tokens. The store then presents the record stored.
func (s *Store) Reseed(ctx context.Context, seed consumer.Seed) (consumer.Reseeded, error) {
	s.epochMu.Lock()
	epoch, start := s.epoch, s.groupStart
	s.epochMu.Unlock()
	if epoch == "" {
		return consumer.Reseeded{}, errors.New("re-seeding the checkpoint store: no group record known yet (take a shard first)")
	}
	override := ""
	if seed.Override != nil {
		override = seed.Override.String()
	}
	args := []any{epoch, start.UnixMilli(), seed.Owner, s.periodMillis(), len(seed.Checkpoints), override}
	for _, shard := range slices.Sorted(maps.Keys(seed.Checkpoints)) {
		args = append(args, shard, seed.Checkpoints[shard].String())
	}
	args = append(args, len(seed.Closed))
	for _, shard := range seed.Closed {
		args = append(args, shard)
	}
	for _, l := range seed.Leases {
		args = append(args, l.Shard, l.Token)
	}
	sent := time.Now()
	res, err := reseedScript.Run(ctx, s.c.client, []string{s.keys.Epoch, s.keys.Checkpoints, s.keys.Closed, s.keys.Leases}, args...).Slice()
	if err != nil {
		return consumer.Reseeded{}, fmt.Errorf("re-seeding the checkpoint store: %w", err)
	}
	if len(res) < 5 {
		return consumer.Reseeded{}, fmt.Errorf("re-seeding the checkpoint store: unexpected script reply %v", res)
	}
	out := consumer.Reseeded{Epoch: toString(res[0]), GroupStart: time.UnixMilli(toInt(res[1])), FoundEpoch: toString(res[2])}
	s.epochMu.Lock()
	s.epoch, s.groupStart = out.Epoch, out.GroupStart
	s.epochMu.Unlock()
	exp, now := toInt(res[3]), toInt(res[4])
	lost := map[string]bool{}
	for _, v := range res[5:] {
		lost[toString(v)] = true
		out.Lost = append(out.Lost, toString(v))
	}
	for _, l := range seed.Leases {
		if lost[l.Shard] {
			continue
		}
		l.Owner = seed.Owner
		l.ExpiresAt = time.UnixMilli(exp)
		l.Deadline = sent.Add(time.Duration(exp-now) * time.Millisecond)
		out.Renewed = append(out.Renewed, l)
	}
	return out, nil
}

// Checkpoint reads the shard's checkpoint; ok is false when there is none.
// A Redis error is returned as an error, never as "no checkpoint".
func (s *Store) Checkpoint(ctx context.Context, shard string) (consumer.Position, bool, error) {
	v, err := s.c.client.HGet(ctx, s.keys.Checkpoints, shard).Result()
	if errors.Is(err, redis.Nil) {
		return consumer.Position{}, false, nil
	}
	if err != nil {
		return consumer.Position{}, false, fmt.Errorf("reading checkpoint of shard %s: %w", shard, err)
	}
	p, err := consumer.ParsePosition(v)
	if err != nil {
		return consumer.Position{}, false, fmt.Errorf("reading checkpoint of shard %s: %w", shard, err)
	}
	return p, true, nil
}

// Checkpoints reads every shard's checkpoint.
func (s *Store) Checkpoints(ctx context.Context) (map[string]consumer.Position, error) {
	all, err := s.c.client.HGetAll(ctx, s.keys.Checkpoints).Result()
	if err != nil {
		return nil, fmt.Errorf("reading checkpoints: %w", err)
	}
	out := make(map[string]consumer.Position, len(all))
	for shard, v := range all {
		// The start override and per-shard starts (fields beginning with
		// '_', which no shard id does) are not checkpoints.
		if strings.HasPrefix(shard, "_") {
			continue
		}
		p, err := consumer.ParsePosition(v)
		if err != nil {
			return nil, fmt.Errorf("reading checkpoint of shard %s: %w", shard, err)
		}
		out[shard] = p
	}
	return out, nil
}

// ClosedShards reads the set of shards fully consumed and committed. Once
// this store took a shard, a store that forgot the group gives
// ErrStoreForgot rather than its empty set.
func (s *Store) ClosedShards(ctx context.Context) (map[string]bool, error) {
	ms, err := closedScript.Run(ctx, s.c.client, []string{s.keys.Closed, s.keys.Epoch}, s.knownEpoch()).StringSlice()
	if err != nil {
		return nil, storeErr("reading closed shards", err)
	}
	out := make(map[string]bool, len(ms))
	for _, m := range ms {
		out[m] = true
	}
	return out, nil
}

// Leases reads every lease, judged against Redis TIME. Released leases are
// included with Owner "" and Expired true.
func (s *Store) Leases(ctx context.Context) (map[string]consumer.LeaseState, error) {
	sent := time.Now()
	res, err := leasesScript.Run(ctx, s.c.client, []string{s.keys.Leases}).Slice()
	if err != nil {
		return nil, fmt.Errorf("reading leases: %w", err)
	}
	if len(res) < 1 {
		return nil, fmt.Errorf("reading leases: unexpected script reply %v", res)
	}
	now := toInt(res[0])
	out := make(map[string]consumer.LeaseState, (len(res)-1)/2)
	for i := 1; i+1 < len(res); i += 2 {
		shard := toString(res[i])
		owner, exp, tok, ok := parseLeaseValue(toString(res[i+1]))
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

// parseLeaseValue reads "<owner>|<expiresAtMillis>|<token>", taking the
// numbers from the right as the scripts do.
func parseLeaseValue(v string) (owner string, exp, tok int64, ok bool) {
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

// Heartbeat records member as alive now, by Redis TIME.
func (s *Store) Heartbeat(ctx context.Context, member string) error {
	if err := heartbeatScript.Run(ctx, s.c.client, []string{s.keys.Members}, member).Err(); err != nil {
		return fmt.Errorf("heartbeating member %s: %w", member, err)
	}
	return nil
}

// LiveMembers lists, sorted, the members that heartbeat within the lease
// period, and removes the others.
func (s *Store) LiveMembers(ctx context.Context) ([]string, error) {
	ms, err := liveMembersScript.Run(ctx, s.c.client, []string{s.keys.Members}, s.periodMillis()).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("listing live members: %w", err)
	}
	slices.Sort(ms)
	return ms, nil
}

// RemoveMember removes member at once (on graceful shutdown), so others
// rebalance without waiting for its heartbeat to age out.
func (s *Store) RemoveMember(ctx context.Context, member string) error {
	if err := removeMemberScript.Run(ctx, s.c.client, []string{s.keys.Members}, member).Err(); err != nil {
		return fmt.Errorf("removing member %s: %w", member, err)
	}
	return nil
}

// RequestHandoff asks the holder of shard to hand it over to requester. The
// request lasts until the lease is released or taken, or the requester stops
// heartbeating; a newer request replaces it.
func (s *Store) RequestHandoff(ctx context.Context, shard, requester string) error {
	if err := requestHandoffScript.Run(ctx, s.c.client, []string{s.keys.Handoff}, shard, requester).Err(); err != nil {
		return fmt.Errorf("requesting hand-off of shard %s: %w", shard, err)
	}
	return nil
}

// HandoffRequests returns shard -> requester for the live leases owner holds
// that a live member asked for.
func (s *Store) HandoffRequests(ctx context.Context, owner string) (map[string]string, error) {
	res, err := handoffRequestsScript.Run(ctx, s.c.client,
		[]string{s.keys.Handoff, s.keys.Leases, s.keys.Members}, owner, s.periodMillis()).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("reading hand-off requests for %s: %w", owner, err)
	}
	out := make(map[string]string, len(res)/2)
	for i := 0; i+1 < len(res); i += 2 {
		out[res[i]] = res[i+1]
	}
	return out, nil
}

func toInt(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case string:
		i, _ := strconv.ParseInt(n, 10, 64)
		return i
	}
	return 0
}

func toString(v any) string {
	switch s := v.(type) {
	case string:
		return s
	case int64:
		return strconv.FormatInt(s, 10)
	}
	return fmt.Sprint(v)
}

// LiveMembersReadOnly lists, sorted, the members that heartbeat within the
// lease period without pruning the others (for inspection).
func (s *Store) LiveMembersReadOnly(ctx context.Context) ([]string, error) {
	res, err := nowScript.Run(ctx, s.c.client, []string{s.keys.Members}).Int64()
	if err != nil {
		return nil, fmt.Errorf("listing live members: %w", err)
	}
	ms, err := s.c.client.ZRangeByScore(ctx, s.keys.Members, &redis.ZRangeBy{
		Min: strconv.FormatInt(res-s.periodMillis(), 10), Max: "+inf",
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("listing live members: %w", err)
	}
	slices.Sort(ms)
	return ms, nil
}
