package consumer

import (
	"context"
)

// CheckpointLister is a Store that lists the shards it holds a checkpoint
// or a shard start of, in one call.
type CheckpointLister interface {
	CheckpointedShards(ctx context.Context) ([]string, error)
}
