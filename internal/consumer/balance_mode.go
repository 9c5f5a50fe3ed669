package consumer

// BalanceMode is what balancing evens out between the group's members.
type BalanceMode string

const (
	// BalanceLoad evens out the bytes/s each member reads: hand-offs move
	// shards from the busiest member to members below their fair load.
	BalanceLoad BalanceMode = "load"
	// BalanceCount evens out the number of shards each member reads.
	BalanceCount BalanceMode = "count"
)

// ShardLoad is a shard's load as its owner last published it.
type ShardLoad struct {
	BytesPerSecond int64
	// Known is false for an entry written by a release that publishes no
	// load; balancing then counts shards for that round.
	Known bool
}
