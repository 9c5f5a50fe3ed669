package consumer

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors a Store returns; adapters map their own to these.
var (
	// ErrLeaseHeld means another live owner holds the lease.
	ErrLeaseHeld = errors.New("lease held by another owner")
	// ErrLeaseLost means the caller no longer owns the lease it presented:
	// it expired and was taken, or its fencing token is stale.
	ErrLeaseLost = errors.New("lease lost")
)

// Position is a checkpoint: the last record of a shard that was fully
// processed. A sub-sequence points inside a KPL aggregated record.
type Position struct {
	Sequence    string
	SubSequence int64
	HasSub      bool
	ShardEnd    bool
}

// Lease is the right to read one shard, fenced by Token.
type Lease struct {
	Shard, Owner string
	Token        int64
	ExpiresAt    time.Time
	// Deadline is by the local clock: the lease may run out from then on,
	// so a reader that could not renew must have stopped by it.
	Deadline time.Time
}

// LeaseState is a lease as the store sees it, expiry judged by its clock.
type LeaseState struct {
	Lease
	Expired bool
}

// Store keeps the checkpoints, closed shards, leases and members of one
// stream for one consumer group. Every method takes the caller's ctx and
// returns Redis trouble as an error, never as an absent value.
type Store interface {
	Acquire(ctx context.Context, shard, owner string) (Lease, error)
	RenewAll(ctx context.Context, owner string, ls []Lease) (renewed []Lease, lost []string, err error)
	Release(ctx context.Context, l Lease) error
	Commit(ctx context.Context, l Lease, p Position) error
	CloseShard(ctx context.Context, l Lease) error
	Checkpoint(ctx context.Context, shard string) (Position, bool, error)
	Checkpoints(ctx context.Context) (map[string]Position, error)
	ClosedShards(ctx context.Context) (map[string]bool, error)
	Leases(ctx context.Context) (map[string]LeaseState, error)
	Heartbeat(ctx context.Context, member string) error
	LiveMembers(ctx context.Context) ([]string, error)
	RemoveMember(ctx context.Context, member string) error
	RequestHandoff(ctx context.Context, shard, requester string) error
	HandoffRequests(ctx context.Context, owner string) (map[string]string, error)
	// StartOverride returns the start position an operator reset the group
	// to (trim_horizon, latest or at_timestamp with ts); ok is false when
	// there is none and the configured start_position applies.
	StartOverride(ctx context.Context) (start string, ts time.Time, ok bool, err error)
}
