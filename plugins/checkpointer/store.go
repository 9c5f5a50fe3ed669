package checkpointer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// Keys are the Redis keys of one group+stream. They share the hash tag
// {<group>:<stream>}, so every script touching several of them runs on one
// Redis Cluster slot.
type Keys struct {
	Checkpoints, Closed, Leases, Members, Handoff, Epoch string
	// Progress holds what owners publish for operators: per shard its
	// lag, last delivery and owner.
	Progress string
	// Delivered holds the redelivery mark: per shard the highest position
	// the group may have handed to a pipeline (delivered.go).
	Delivered string
}

// Store reads and changes the checkpoints, leases, closed shards, members
// and hand-off requests of one stream for the group.
type Store struct {
	c        *Checkpointer
	streamID string
	keys     Keys
	log      *service.Logger

	// epoch is the id of the group record this store's caller knows: set by
	// Join (or, for a caller that never joined, its first take), presented
	// by every mutation, changed by a re-seed.
	epochMu    sync.Mutex
	epoch      string
	groupStart time.Time
	// provClosed: shards this store last read closed while the store
	// listed them provisional (noteProvisionalCloses), which a re-seed
	// does not write back as closes (Reseed).
	provClosed map[string]bool

	replicas replicaGate
	// youngServer is the Redis server's uptime when Join found it younger
	// than a lease period, with a record of the group created since it
	// started that no re-seed marked (0 otherwise; join.go).
	youngServer time.Duration
	young       bool

	// marks holds the highest delivered position this store wrote per
	// shard, for a re-seed to write back (delivered.go).
	marks deliveredMarks
	// seenReseed is the group record's re-seed time the last balancing
	// round read (noteReseeded).
	seenReseed atomic.Int64
}

// streamLabel is the `stream` label of the checkpoint metrics: the stream's
// name, as the input's metrics have it, also for a store keyed by ARN.
func (s *Store) streamLabel() string { return kinesisx.StreamName(s.streamID) }

func (s *Store) knownEpoch() string {
	s.epochMu.Lock()
	defer s.epochMu.Unlock()
	return s.epoch
}

// learnEpoch adopts the group record Join or a first take found.
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
		return forgotErr(what, strings.TrimSpace(strings.TrimPrefix(re.Error(), "FORGOT")))
	}
	return fmt.Errorf("%s: %w", what, err)
}

// forgotErr is ErrStoreForgot for a call that found the group record gone
// or replaced by the one whose id is found.
func forgotErr(what, found string) error {
	if found == "" {
		found = "none"
	}
	return fmt.Errorf("%s: the group record is gone or replaced (found %s): %w", what, found, consumer.ErrStoreForgot)
}

// StreamID is the identity the keys are named after.
func (s *Store) StreamID() string { return s.streamID }

// Keys are the store's Redis keys.
func (s *Store) Keys() Keys { return s.keys }

// The Redis store is the consumer's Store: leases, checkpoints and the
// sentinel errors are the consumer's types.
var _ consumer.Store = (*Store)(nil)

func (s *Store) periodMillis() int64 { return s.c.cfg.LeasePeriod.Milliseconds() }

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
