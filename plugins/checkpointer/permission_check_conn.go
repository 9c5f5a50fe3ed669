package checkpointer

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// connectionProbe is a command the input sends outside its scripts, under
// the name its ACL rule has.
type connectionProbe struct {
	name string
	args []any
}

// connectionProbes are the commands this configuration sends outside the
// scripts: INFO replication and WAIT when commits and closes may wait for
// replicas (min_replicas_to_ack above 0, or automatic on failover or
// cluster), CLUSTER SLOTS and COMMAND on a cluster (the client reads the
// slots and the command table with them). WAIT 0 0 returns at once.
func (s *Store) connectionProbes() []connectionProbe {
	cfg := s.c.cfg
	var out []connectionProbe
	if cfg.MinReplicasToAck > 0 || (cfg.MinReplicasToAck < 0 && (cfg.RedisKind == KindFailover || cfg.RedisKind == KindCluster)) {
		out = append(out, connectionProbe{"INFO", []any{"info", "replication"}}, connectionProbe{"WAIT", []any{"wait", 0, 0}})
	}
	if cfg.RedisKind == KindCluster {
		out = append(out, connectionProbe{"CLUSTER|SLOTS", []any{"cluster", "slots"}}, connectionProbe{"COMMAND", []any{"command"}})
	}
	return out
}

// checkConnectionCommands tries each of connectionProbes on the master of
// the stream's slot and returns the names Redis refused. Only a refusal
// counts (NOPERM): any other error reply, such as CLUSTER SLOTS on a
// server without cluster support, is not the user's permission; a
// connection error is returned.
func (s *Store) checkConnectionCommands(ctx context.Context) ([]string, error) {
	probes := s.connectionProbes()
	if len(probes) == 0 {
		return nil, nil
	}
	node, err := s.c.masterFor(ctx, s.keys.Epoch)
	if err != nil {
		return nil, fmt.Errorf("checking the Redis user's permissions: %w", err)
	}
	var refused []string
	for _, p := range probes {
		no, err := probeRefused(ctx, node, p.args...)
		if err != nil {
			return nil, fmt.Errorf("checking the Redis user's permissions (%s): %w", p.name, err)
		}
		if no {
			refused = append(refused, p.name)
		}
	}
	return refused, nil
}

// probeRefused runs one command and tells a permission refusal from
// success or any other error reply.
func probeRefused(ctx context.Context, c *redis.Client, args ...any) (bool, error) {
	cmd := c.Do(ctx, args...)
	err := cmd.Err()
	if err == nil {
		return false, nil
	}
	if errors.Is(err, ErrNoPermission) || permissionError(cmd, err) != nil {
		return true, nil
	}
	var re redis.Error
	if errors.As(err, &re) {
		return false, nil
	}
	return false, err
}
