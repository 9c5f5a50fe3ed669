package input

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// A stream that stops carrying the tags of stream_tags is released by both
// instances with its checkpoints committed at its last record; tagged
// again within deleted_stream_retention it resumes from them: nothing is
// read twice, and what was written meanwhile is read.
func TestIntegrationStreamUntaggedIsReleasedAndResumes(t *testing.T) {
	t.Parallel()
	emu := testenv.SharedKinesisMock(t)
	red := testenv.NewRedis(t)
	client := emu.Client()
	p := uniquePrefix("ttag")
	name := p + "1"
	arn := emu.MustCreateStream(t, name, 2)
	tag := func(on bool) {
		t.Helper()
		var err error
		if on {
			_, err = client.AddTagsToStream(t.Context(), &kinesis.AddTagsToStreamInput{StreamName: aws.String(name), Tags: map[string]string{"env": "prod"}})
		} else {
			_, err = client.RemoveTagsFromStream(t.Context(), &kinesis.RemoveTagsFromStreamInput{StreamName: aws.String(name), TagKeys: []string{"env"}})
		}
		require.NoError(t, err)
	}
	tag(true)
	putKeyed(t, client, name, "a", 40)

	const interval = 5 * time.Second
	extra := "  stream_tags: { env: prod }\n"
	col := &streamCollector{}
	logsA, logsB := &lockedBuffer{}, &lockedBuffer{}
	startFollowing(t, followingYAML(p+"*", emu.Endpoint, red.URL(), "a", interval, extra), col, logsA)
	startFollowing(t, followingYAML(p+"*", emu.Endpoint, red.URL(), "b", interval, extra), col, logsB)
	require.Eventually(t, func() bool { n, _ := col.count(name, "a-"); return n >= 40 }, 2*interval+30*time.Second, 100*time.Millisecond)

	tag(false)
	released := func() bool {
		return logsA.count("Stopped reading stream "+name) == 1 && logsB.count("Stopped reading stream "+name) == 1
	}
	require.Eventually(t, released, 3*interval+15*time.Second, 100*time.Millisecond, "both instances release the untagged stream")
	ck := checkpoints(t, red.URL(), "g", arn)
	assert.Len(t, ck, 2, "both shards committed: %v", ck)

	// Written while no instance reads the stream: read once it is tagged
	// again, from the checkpoints.
	putKeyed(t, client, name, "b", 20)
	tag(true)
	require.Eventually(t, func() bool { n, _ := col.count(name, "b-"); return n >= 20 }, 3*interval+30*time.Second, 100*time.Millisecond, "the stream tagged again is read again")
	for _, prefix := range []string{"a-", "b-"} {
		n, dup := col.count(name, prefix)
		t.Logf("%s %s*: %d delivered, %d more than once", name, prefix, n, dup)
		assert.Zero(t, dup, "nothing read twice across the release and the resume")
	}
	n, _ := col.count(name, "a-")
	assert.Equal(t, 40, n)
}

// The keys of a deleted stream are deleted once it has been gone for
// deleted_stream_retention, and its entry leaves the group's streams.
func TestIntegrationDeletedStreamKeysArePrunedAfterRetention(t *testing.T) {
	t.Parallel()
	emu := testenv.SharedKinesisMock(t)
	red := testenv.NewRedis(t)
	client := emu.Client()
	p := uniquePrefix("tprune")
	name := p + "1"
	arn := emu.MustCreateStream(t, name, 1)
	putKeyed(t, client, name, "a", 10)

	const interval = 5 * time.Second
	col := &streamCollector{}
	logs := &lockedBuffer{}
	startFollowing(t, followingYAML(p+"*", emu.Endpoint, red.URL(), "a", interval, "  deleted_stream_retention: 1s\n"), col, logs)
	require.Eventually(t, func() bool { n, _ := col.count(name, "a-"); return n >= 10 }, 2*interval+30*time.Second, 100*time.Millisecond)
	keys := func() []string {
		ks, err := red.Client().Keys(t.Context(), "*"+arn+"*").Result()
		require.NoError(t, err)
		return ks
	}
	require.NotEmpty(t, keys())

	_, err := client.DeleteStream(t.Context(), &kinesis.DeleteStreamInput{StreamName: aws.String(name)})
	require.NoError(t, err)
	deleted := time.Now()
	require.Eventually(t, func() bool { return len(keys()) == 0 }, 4*interval+15*time.Second, 200*time.Millisecond, "the deleted stream's keys are pruned")
	t.Logf("the deleted stream's keys were pruned %v after its deletion (deleted_stream_retention 1s, stream_discovery_interval %v)", time.Since(deleted).Round(time.Millisecond), interval)
	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL, cfg.Group = red.URL(), "g"
	ckp, err := checkpointer.New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	defer ckp.Close()
	d, err := ckp.ReadDiscovery(t.Context())
	require.NoError(t, err)
	for _, s := range d.Streams {
		assert.NotEqual(t, arn, s.Key(), "the pruned stream left the group's streams")
	}
	assert.Equal(t, 1, logs.count("Deleted the checkpoints of stream "+arn), logs.String())
}
