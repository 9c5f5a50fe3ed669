package checkpointer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotReplicated is returned, matched with errors.Is, when a commit or a
// close was written on the master but fewer replicas than
// min_replicas_to_ack acknowledged it within replica_ack_timeout. The write
// is not reported done; the caller retries it (scripts are idempotent).
var ErrNotReplicated = errors.New("not acknowledged by enough replicas")

// replicaProbeEvery is how long the automatic choice (1 replica when the
// master has replicas, else none) is trusted before the master is asked
// again; a write the replicas did not acknowledge asks again at once, so a
// master promoted without replicas stops waiting after one timeout.
const replicaProbeEvery = 30 * time.Second

// replicaGate decides how many replicas a commit or close waits for.
type replicaGate struct {
	mu       sync.Mutex
	n        int
	probedAt time.Time
}

// want returns how many replicas must acknowledge a write now: the
// configured min_replicas_to_ack, or, when it is -1 (automatic), 1 for kind failover
// or cluster if the master has a connected replica, else 0.
func (g *replicaGate) want(ctx context.Context, s *Store) (int, error) {
	cfg := s.c.cfg
	if cfg.MinReplicasToAck >= 0 {
		return cfg.MinReplicasToAck, nil
	}
	if cfg.RedisKind != KindFailover && cfg.RedisKind != KindCluster {
		return 0, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.probedAt.IsZero() && time.Since(g.probedAt) < replicaProbeEvery {
		return g.n, nil
	}
	node, err := s.c.masterFor(ctx, s.keys.Leases)
	if err != nil {
		return 0, err
	}
	info, err := node.Info(ctx, "replication").Result()
	if err != nil {
		return 0, fmt.Errorf("reading the master's replicas (INFO replication): %w", err)
	}
	g.n = 0
	if connectedReplicas(info) > 0 {
		g.n = 1
	}
	g.probedAt = time.Now()
	return g.n, nil
}

// forget makes the next want ask the master again.
func (g *replicaGate) forget() {
	g.mu.Lock()
	g.probedAt = time.Time{}
	g.mu.Unlock()
}

// connectedReplicas reads connected_slaves from INFO replication.
func connectedReplicas(info string) int {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// replicated runs write and, when replicas must acknowledge it, WAITs for
// them. WAIT cannot run inside a script and counts the writes of its own
// connection, so both run on one connection to the master that owns the
// stream's hash slot.
func (s *Store) replicated(ctx context.Context, what string, write func(redis.Scripter) error) error {
	n, err := s.replicas.want(ctx, s)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 {
		return write(s.c.client)
	}
	node, err := s.c.masterFor(ctx, s.keys.Leases)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	conn := node.Conn()
	defer func() { _ = conn.Close() }()
	err = write(conn)
	if cl, ok := s.c.client.(*redis.ClusterClient); ok && movedError(err) {
		// A node connection does not follow MOVED as the cluster client
		// does: the slot moved (a resharding) since the client's map was
		// read. Reload the map now and write once more on the slot's new
		// master. ForEachMaster reloads the map before it runs.
		if rerr := cl.ForEachMaster(ctx, func(context.Context, *redis.Client) error { return nil }); rerr != nil {
			return fmt.Errorf("%s: reloading the cluster's slots after %v: %w", what, err, rerr)
		}
		if node, err = s.c.masterFor(ctx, s.keys.Leases); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		_ = conn.Close()
		conn = node.Conn()
		err = write(conn)
	}
	if err != nil {
		return err
	}
	timeout := s.c.cfg.ReplicaAckTimeout
	acked, err := conn.Wait(ctx, n, timeout).Result()
	if err != nil {
		return fmt.Errorf("%s: waiting for %d replicas: %w", what, n, err)
	}
	if int(acked) < n {
		s.replicas.forget()
		return fmt.Errorf("%s: %d of %d replicas acknowledged within %v (%s): %w", what, acked, n, timeout, fieldPathReplicaTimeout, ErrNotReplicated)
	}
	return nil
}

// movedError reports whether err is a Cluster's MOVED redirection: the
// key's slot is served by another master now.
func movedError(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "MOVED ")
}

// masterFor returns a client of the master that owns key: the cluster node
// of its slot, or the client itself for one server or Sentinel.
func (c *Checkpointer) masterFor(ctx context.Context, key string) (*redis.Client, error) {
	switch cl := c.client.(type) {
	case *redis.ClusterClient:
		node, err := cl.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("finding the cluster master of %s: %w", key, err)
		}
		return node, nil
	case *redis.Client:
		return cl, nil
	}
	return nil, fmt.Errorf("waiting for replicas needs a single, Sentinel or Cluster client, not %T; set %s: 0", c.client, fieldPathMinReplicas)
}
