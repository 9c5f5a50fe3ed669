package ops

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/streams"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

func testARN(name string) string { return "arn:aws:kinesis:us-east-1:000000000000:stream/" + name }

// TestIntegrationCLIGroupStreams: `show` without --stream lists every
// stream the group has state on (a deleted one its discovery marked gone
// included, another group's not), `show --stream PATTERN` those that
// match, and `export --stream PATTERN` one document per matching stream,
// each as a single export; all as the read-only ACL user, and without
// Kinesis.
func TestIntegrationCLIGroupStreams(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, testenv.RedisOptions{ShippedACL: true})
	ctx := t.Context()
	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL, cfg.Group, cfg.LeasePeriod = r.URL(), "billing", 30*time.Second
	cp, err := checkpointer.New(ctx, cfg, nil, nil)
	require.NoError(t, err)
	defer cp.Close()
	seed := func(cp *checkpointer.Checkpointer, stream, seq string, keep bool) {
		s := cp.Stream(testARN(stream))
		_, err := s.Join(ctx)
		require.NoError(t, err)
		tk, err := s.Acquire(ctx, "shardId-000000000000", "seeder")
		require.NoError(t, err)
		require.NoError(t, s.Commit(ctx, tk.Lease, consumer.Position{Sequence: seq}))
		if !keep {
			require.NoError(t, s.Release(ctx, tk.Lease))
		}
	}
	seed(cp, "t-1", "11", true)
	seed(cp, "t-2", "22", false)
	seed(cp, "orders", "33", false)
	// A group whose name starts with this one's and ':'.
	otherCfg := cfg
	otherCfg.Group = "billing:eu"
	other, err := checkpointer.New(ctx, otherCfg, nil, nil)
	require.NoError(t, err)
	defer other.Close()
	seed(other, "t-9", "99", false)
	// Discovery listed t-1 and t-2, then only t-1: t-2 is gone.
	for _, found := range [][]string{{"t-1", "t-2"}, {"t-1"}} {
		var ids []streams.Identity
		for _, n := range found {
			ids = append(ids, streams.Identity{Name: n, ARN: testARN(n), Created: time.UnixMilli(1000), Status: types.StreamStatusActive})
		}
		require.Eventually(t, func() bool {
			_, rd, err := cp.DiscoverStreams(ctx, "lister", 100*time.Millisecond, time.Hour, func(context.Context) ([]streams.Identity, error) { return ids, nil })
			return err == nil && rd.Listed
		}, 5*time.Second, 20*time.Millisecond)
	}

	base := []string{"--redis-url", r.URLAs(testenv.ACLViewer), "--group", "billing"}
	out, err := runCLI(ctx, append([]string{"show", "--json"}, base...)...)
	require.NoError(t, err, out)
	var rep GroupReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	byName := map[string]GroupStreamRow{}
	for _, s := range rep.Streams {
		byName[s.Stream] = s
	}
	require.ElementsMatch(t, []string{"orders", "t-1", "t-2"}, keys(byName), "the group's streams, not billing:eu's")
	assert.Equal(t, 1, byName["t-1"].LiveLeases)
	assert.Equal(t, 1, byName["t-2"].Checkpoints)
	require.NotNil(t, byName["t-2"].Discovery)
	assert.NotNil(t, byName["t-2"].Discovery.GoneAt, "t-2 left the listing")
	assert.Nil(t, byName["t-1"].Discovery.GoneAt)
	assert.Nil(t, byName["orders"].Discovery, "named, not discovered")
	assert.NotNil(t, rep.ListedAt)

	out, err = runCLI(ctx, append([]string{"show", "--stream", "t-*"}, base...)...)
	require.NoError(t, err, out)
	assert.Contains(t, out, "group billing: 2 streams matching t-*")
	assert.Contains(t, out, "gone since")
	assert.NotContains(t, out, "orders")

	out, err = runCLI(ctx, append([]string{"export", "--stream", "t-?"}, base...)...)
	require.NoError(t, err, out)
	var set ExportSet
	require.NoError(t, json.Unmarshal([]byte(out), &set), out)
	assert.Equal(t, exportSetFormat, set.Format)
	require.Len(t, set.Streams, 2)
	assert.Equal(t, testARN("t-1"), set.Streams[0].StreamID)
	assert.Equal(t, map[string]string{"shardId-000000000000": "11"}, set.Streams[0].Checkpoints)
	assert.Equal(t, map[string]string{"shardId-000000000000": "22"}, set.Streams[1].Checkpoints)
	assert.Equal(t, exportFormat, set.Streams[1].Format, "each stream is an export `reset --to sequences=` reads")

	_, err = runCLI(ctx, append([]string{"reset", "--to", "latest"}, base...)...)
	require.Error(t, err, "reset still needs one stream")
	denied, err := r.ACLDenials(ctx)
	require.NoError(t, err)
	assert.Empty(t, denied)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Guards issue 60 item 11: `show --group` with a misspelled group said
// "0 streams" and nothing else, the same as a group that has not started.
func TestIntegrationCLIShowUnknownGroupSaysWhatToCheck(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, testenv.RedisOptions{})
	out, err := runCLI(t.Context(), "show", "--redis-url", r.URL(), "--group", "bilting")
	require.NoError(t, err, out)
	assert.Contains(t, out, "group bilting: 0 streams")
	assert.Contains(t, out, "this Redis holds nothing of group bilting under key prefix kinesis: check --group and --key-prefix against the inputs' checkpoint.group and checkpoint.key_prefix", out)
}
