package input

import (
	"context"
	"errors"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// storeAdapter lets the consumer use the Redis checkpointer through its own
// narrow Store interface, mapping types and sentinel errors.
type storeAdapter struct{ s *checkpointer.Store }

var _ consumer.Store = storeAdapter{}

func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, checkpointer.ErrLeaseLost), errors.Is(err, checkpointer.ErrNotOwner):
		return errors.Join(consumer.ErrLeaseLost, err)
	case errors.Is(err, checkpointer.ErrLeaseHeld):
		return errors.Join(consumer.ErrLeaseHeld, err)
	}
	return err
}

func toLease(l checkpointer.Lease) consumer.Lease {
	return consumer.Lease{Shard: l.Shard, Owner: l.Owner, Token: l.Token, ExpiresAt: l.ExpiresAt, Deadline: l.Deadline}
}

func fromLease(l consumer.Lease) checkpointer.Lease {
	return checkpointer.Lease{Shard: l.Shard, Owner: l.Owner, Token: l.Token, ExpiresAt: l.ExpiresAt, Deadline: l.Deadline}
}

func toPosition(p checkpointer.Position) consumer.Position {
	return consumer.Position{Sequence: p.Sequence, SubSequence: p.SubSequence, HasSub: p.HasSub, ShardEnd: p.ShardEnd}
}

func (a storeAdapter) Acquire(ctx context.Context, shard, owner string) (consumer.Lease, error) {
	l, err := a.s.Acquire(ctx, shard, owner)
	return toLease(l), mapErr(err)
}

func (a storeAdapter) RenewAll(ctx context.Context, owner string, ls []consumer.Lease) ([]consumer.Lease, []string, error) {
	in := make([]checkpointer.Lease, len(ls))
	for i, l := range ls {
		in[i] = fromLease(l)
	}
	renewed, lost, err := a.s.RenewAll(ctx, owner, in)
	out := make([]consumer.Lease, len(renewed))
	for i, l := range renewed {
		out[i] = toLease(l)
	}
	return out, lost, mapErr(err)
}

func (a storeAdapter) Release(ctx context.Context, l consumer.Lease) error {
	return mapErr(a.s.Release(ctx, fromLease(l)))
}

func (a storeAdapter) Commit(ctx context.Context, l consumer.Lease, p consumer.Position) error {
	return mapErr(a.s.Commit(ctx, fromLease(l), checkpointer.Position{Sequence: p.Sequence, SubSequence: p.SubSequence, HasSub: p.HasSub, ShardEnd: p.ShardEnd}))
}

func (a storeAdapter) CloseShard(ctx context.Context, l consumer.Lease) error {
	return mapErr(a.s.CloseShard(ctx, fromLease(l)))
}

func (a storeAdapter) Checkpoint(ctx context.Context, shard string) (consumer.Position, bool, error) {
	p, ok, err := a.s.Checkpoint(ctx, shard)
	return toPosition(p), ok, err
}

func (a storeAdapter) Checkpoints(ctx context.Context) (map[string]consumer.Position, error) {
	ps, err := a.s.Checkpoints(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]consumer.Position, len(ps))
	for id, p := range ps {
		out[id] = toPosition(p)
	}
	return out, nil
}

func (a storeAdapter) ClosedShards(ctx context.Context) (map[string]bool, error) {
	return a.s.ClosedShards(ctx)
}

func (a storeAdapter) Leases(ctx context.Context) (map[string]consumer.LeaseState, error) {
	ls, err := a.s.Leases(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]consumer.LeaseState, len(ls))
	for id, l := range ls {
		out[id] = consumer.LeaseState{Lease: toLease(l.Lease), Expired: l.Expired}
	}
	return out, nil
}

func (a storeAdapter) Heartbeat(ctx context.Context, member string) error {
	return a.s.Heartbeat(ctx, member)
}

func (a storeAdapter) LiveMembers(ctx context.Context) ([]string, error) {
	return a.s.LiveMembers(ctx)
}

func (a storeAdapter) RemoveMember(ctx context.Context, member string) error {
	return a.s.RemoveMember(ctx, member)
}

func (a storeAdapter) RequestHandoff(ctx context.Context, shard, requester string) error {
	return a.s.RequestHandoff(ctx, shard, requester)
}

func (a storeAdapter) HandoffRequests(ctx context.Context, owner string) (map[string]string, error) {
	return a.s.HandoffRequests(ctx, owner)
}

func (a storeAdapter) StartOverride(ctx context.Context) (string, time.Time, bool, error) {
	o, ok, err := a.s.StartOverride(ctx)
	return o.Mode, o.Timestamp, ok, err
}
