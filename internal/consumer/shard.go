package consumer

// Shard is what discovery knows of a shard.
type Shard struct {
	ID       string
	Parent   string
	Adjacent string
	// Closed is true when the shard has an ending sequence number: it takes
	// no more writes and reading it reaches an end.
	Closed bool
	// HashRange is the shard's hash key range, nil when the listing gives
	// none: user records of aggregates outside it are dropped (hashrange.go).
	HashRange *HashRange
}

// Parents returns the shard's parents, without empty ids.
func (s Shard) Parents() []string {
	var ps []string
	for _, p := range []string{s.Parent, s.Adjacent} {
		if p != "" {
			ps = append(ps, p)
		}
	}
	return ps
}
