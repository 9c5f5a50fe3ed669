package checkpointer

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// The tests in this file run the store as the users of the shipped ACL
// file (config/deploy/redis-acl.conf, loaded as it is, passwords filled
// in): every operation a role performs must pass, and the server's ACL LOG
// must stay empty, so a command the code runs and the file lacks fails
// here. The negative checks show each rule is tight.

const aclStream = "arn:aws:kinesis:us-east-1:000000000000:stream/acl"

// aclStore connects as user, one of the shipped ACL users.
func aclStore(t *testing.T, r *testenv.Redis, user, group string) *Store {
	t.Helper()
	cfg := testConfig(backend{url: r.URLAs(user), kind: KindSimple}, group)
	cfg.LeasePeriod = 30 * time.Second
	c, err := New(t.Context(), cfg, nil, nil)
	require.NoError(t, err, "connecting as %s", user)
	t.Cleanup(func() { _ = c.Close() })
	return c.Stream(aclStream)
}

func assertNoACLDenials(t *testing.T, r *testenv.Redis) {
	t.Helper()
	denied, err := r.ACLDenials(t.Context())
	require.NoError(t, err)
	assert.Empty(t, denied, "Redis refused commands or keys; the shipped ACL file lacks them")
}

// TestIntegrationACLInputUserRunsEveryStoreOperation runs every operation
// of the consumer's Store, each script path included, as the input's user.
func TestIntegrationACLInputUserRunsEveryStoreOperation(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, testenv.RedisOptions{ShippedACL: true})
	admin := r.Client()
	defer admin.Close()
	runEveryInputOperation(t, aclStore(t, r, testenv.ACLInput, "orders"), admin)
	assertNoACLDenials(t, r)
}

// TestIntegrationACLInputUserOnCluster is the same on a Redis Cluster,
// whose client also routes (CLUSTER SLOTS, COMMAND) and, with a replica
// check, reads INFO.
func TestIntegrationACLInputUserOnCluster(t *testing.T) {
	t.Parallel()
	cl := testenv.NewRedisCluster(t, testenv.RedisOptions{ShippedACL: true})
	cfg := testConfig(backend{url: cl.URLAs(testenv.ACLInput), kind: KindCluster}, "orders")
	cfg.LeasePeriod = 30 * time.Second
	c, err := New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	admin := cl.Client()
	defer admin.Close()
	runEveryInputOperation(t, c.Stream(aclStream), admin)
	for _, n := range cl.Nodes {
		denied, err := n.ACLDenials(t.Context())
		require.NoError(t, err)
		assert.Empty(t, denied, "node %s refused commands or keys; the shipped ACL file lacks them", n.Addr)
	}
}

// TestIntegrationACLInputUserThroughSentinel is the same through Sentinel
// with a replica: commits and closes read INFO and WAIT for the replica.
// The users live on the master (and, in production, every replica).
func TestIntegrationACLInputUserThroughSentinel(t *testing.T) {
	t.Parallel()
	master := testenv.NewRedis(t, testenv.RedisOptions{ShippedACL: true})
	testenv.NewReplica(t, master)
	sentinel := testenv.NewSentinel(t, master)
	cfg := DefaultConfig()
	cfg.RedisURL = "redis://" + testenv.ACLInput + ":" + testenv.ACLPassword(testenv.ACLInput) + "@" + sentinel.Addr
	cfg.RedisKind, cfg.RedisMaster, cfg.Group = KindFailover, testenv.SentinelMaster, "orders"
	cfg.LeasePeriod = 30 * time.Second
	c, err := New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	admin := master.Client()
	defer admin.Close()
	runEveryInputOperation(t, c.Stream(aclStream), admin)
	assertNoACLDenials(t, master)
}

func runEveryInputOperation(t *testing.T, s *Store, admin redis.Cmdable) {
	ctx := t.Context()

	_, err := s.Join(ctx)
	require.NoError(t, err, "join")
	created := time.UnixMilli(1_700_000_000_000)
	_, err = s.StreamCreated(ctx, created, created)
	require.NoError(t, err, "record the stream's creation time")
	take, err := s.Acquire(ctx, "shard-0", "a")
	require.NoError(t, err, "acquire a shard without a checkpoint (reads its own start)")
	l := take.Lease
	_, err = s.WriteDelivered(ctx, "a", []DeliveredMark{{Shard: "shard-0", Token: l.Token, Position: consumer.Position{Sequence: "9"}}})
	require.NoError(t, err, "store how far it delivered")
	_, err = s.Renew(ctx, l)
	require.NoError(t, err, "renew")
	_, lost, err := s.RenewAll(ctx, "a", []consumer.Lease{l})
	require.NoError(t, err, "renew all")
	assert.Empty(t, lost)
	p, _ := consumer.ParsePosition("5")
	require.NoError(t, s.Commit(ctx, l, p), "commit")
	_, _, err = s.Checkpoint(ctx, "shard-0")
	require.NoError(t, err, "read a checkpoint")
	require.NoError(t, s.PublishProgress(ctx, "a", map[string]consumer.Progress{"shard-0": {LagMillis: 1, BytesPerSecond: 10}}), "publish progress")
	_, err = s.ShardLoads(ctx)
	require.NoError(t, err, "read loads")
	require.NoError(t, s.Heartbeat(ctx, "a"), "heartbeat")
	require.NoError(t, s.Heartbeat(ctx, "b"), "heartbeat")
	_, err = s.LiveMembers(ctx)
	require.NoError(t, err, "live members")
	require.NoError(t, s.RequestHandoff(ctx, "shard-0", "b"), "request a hand-off")
	_, err = s.HandoffRequests(ctx, "a")
	require.NoError(t, err, "hand-off requests")
	_, err = s.Leases(ctx)
	require.NoError(t, err, "leases")
	require.NoError(t, s.Release(ctx, l), "release")
	take, err = s.Acquire(ctx, "shard-0", "a")
	require.NoError(t, err, "acquire a shard with a checkpoint")
	require.NoError(t, s.CloseShard(ctx, take.Lease), "close a shard")
	_, err = s.ClosedShards(ctx)
	require.NoError(t, err, "closed shards")
	pruned, err := s.Prune(ctx, []string{"shard-0"})
	require.NoError(t, err, "prune a trimmed shard")
	assert.Equal(t, []string{"shard-0"}, pruned)
	take, err = s.Acquire(ctx, "shard-1", "a")
	require.NoError(t, err)

	// The store forgets the group: the input re-seeds it.
	require.NoError(t, admin.Del(ctx, s.Keys().Epoch, s.Keys().Leases).Err())
	start := consumer.StartOverride{Mode: consumer.StartTrimHorizon}
	_, err = s.Reseed(ctx, consumer.Seed{Owner: "a", Checkpoints: map[string]consumer.Position{"shard-0": p},
		Closed: []string{"shard-0"}, Override: &start, Leases: []consumer.Lease{take.Lease}})
	require.NoError(t, err, "re-seed")

	// The stream was recreated: the input clears the old state.
	cleared, err := s.StreamCreated(ctx, created, created.Add(time.Hour))
	require.NoError(t, err, "clear a recreated stream's state")
	assert.True(t, cleared)
	require.NoError(t, s.RemoveMember(ctx, "a"), "leave the group")
}

// TestIntegrationACLOperatorUsers runs what `checkpoints show` and `export`
// read as the viewer, and reset and delete as the admin; the viewer may
// change nothing and the input's user may read no key outside its prefix.
func TestIntegrationACLOperatorUsers(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, testenv.RedisOptions{ShippedACL: true})
	ctx := t.Context()
	in := aclStore(t, r, testenv.ACLInput, "orders")
	_, err := in.Join(ctx)
	require.NoError(t, err)
	take, err := in.Acquire(ctx, "shard-0", "a")
	require.NoError(t, err)
	p, _ := consumer.ParsePosition("7")
	require.NoError(t, in.Commit(ctx, take.Lease, p))
	require.NoError(t, in.Release(ctx, take.Lease))

	view := aclStore(t, r, testenv.ACLViewer, "orders")
	_, err = view.HasState(ctx)
	require.NoError(t, err, "has state")
	_, err = view.Checkpoints(ctx)
	require.NoError(t, err, "checkpoints")
	_, err = view.ClosedShards(ctx)
	require.NoError(t, err, "closed shards")
	_, err = view.Leases(ctx)
	require.NoError(t, err, "leases")
	_, err = view.AllHandoffRequests(ctx)
	require.NoError(t, err, "hand-off requests")
	_, err = view.Progress(ctx)
	require.NoError(t, err, "progress")
	_, err = view.LiveMembersReadOnly(ctx)
	require.NoError(t, err, "live members")
	_, err = view.ShardStarts(ctx)
	require.NoError(t, err, "shard starts")
	_, _, err = view.StartOverride(ctx)
	require.NoError(t, err, "start override")
	_, err = view.Delivered(ctx)
	require.NoError(t, err, "delivered positions")

	adm := aclStore(t, r, testenv.ACLAdmin, "orders")
	latest := consumer.StartOverride{Mode: consumer.StartLatest}
	_, err = adm.Reset(ctx, &latest, map[string]consumer.Position{"shard-0": p, "shard-1": {ShardEnd: true}}, nil, false)
	require.NoError(t, err, "reset")
	_, err = adm.RestoreDelivered(ctx, map[string]consumer.Position{"shard-0": p})
	require.NoError(t, err, "restore delivered positions from an export")
	_, err = adm.Delete(ctx, false)
	require.NoError(t, err, "delete")
	assertNoACLDenials(t, r)

	// The viewer's scripts may not write: a reset is refused by Redis,
	// named, and changes nothing.
	in = aclStore(t, r, testenv.ACLInput, "billing")
	_, err = in.Join(ctx)
	require.NoError(t, err)
	require.NoError(t, in.Commit(ctx, mustAcquire(t, in, "shard-2"), p))
	view = aclStore(t, r, testenv.ACLViewer, "billing")
	_, err = view.Reset(ctx, nil, map[string]consumer.Position{"shard-2": {Sequence: "1"}}, nil, true)
	require.ErrorIs(t, err, ErrNoPermission)
	assert.Contains(t, err.Error(), "docs/deploy.md")
	assert.Contains(t, err.Error(), "may not run HSET", "the refused command is named: %v", err)
	got, _, err := view.Checkpoint(ctx, "shard-2")
	require.NoError(t, err)
	assert.Equal(t, "7", got.String(), "the refused reset changed nothing")

	// The input's user reaches no key outside its prefix.
	other := aclStore(t, r, testenv.ACLAdmin, "orders")
	other.keys.Checkpoints = "other:" + other.keys.Checkpoints
	_, err = in.c.client.HGetAll(ctx, other.keys.Checkpoints).Result()
	require.ErrorIs(t, err, ErrNoPermission)
	assert.Contains(t, err.Error(), "may not access the keys of HGETALL")
}

func mustAcquire(t *testing.T, s *Store, shard string) consumer.Lease {
	t.Helper()
	take, err := s.Acquire(t.Context(), shard, "a")
	require.NoError(t, err)
	return take.Lease
}

// TestIntegrationACLInputUserWaitsForReplicas: with min_replicas_to_ack
// set, a commit WAITs for replicas; the input's user may run WAIT (here no
// replica answers, so the commit is reported not replicated, not refused).
func TestIntegrationACLInputUserWaitsForReplicas(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, testenv.RedisOptions{ShippedACL: true})
	cfg := testConfig(backend{url: r.URLAs(testenv.ACLInput), kind: KindSimple}, "orders")
	cfg.LeasePeriod, cfg.MinReplicasToAck, cfg.ReplicaAckTimeout = 30*time.Second, 1, 50*time.Millisecond
	c, err := New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	s := c.Stream(aclStream)
	_, err = s.Join(t.Context())
	require.NoError(t, err)
	p, _ := consumer.ParsePosition("5")
	err = s.Commit(t.Context(), mustAcquire(t, s, "shard-0"), p)
	require.ErrorIs(t, err, ErrNotReplicated)
	assertNoACLDenials(t, r)
}
