package ops

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationResetAsksForYes guards issue 39 item 13: `reset --to
// trim_horizon` discarded every checkpoint without confirmation, while
// `delete` asks for --yes. Without --yes a reset now prints what it would
// change, writes nothing and names the flag.
func TestIntegrationResetAsksForYes(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	ctx := t.Context()
	const arn = "arn:aws:kinesis:us-east-1:000000000000:stream/yes"
	s := groupStore(t, r.URL(), "g", arn)
	p := consumer.Position{Sequence: "49590338271490256608559692538361571095921575989136588898"}
	_, err := s.Reset(ctx, nil, map[string]consumer.Position{shard0: p}, nil, false)
	require.NoError(t, err)
	args := []string{"reset", "--redis-url", r.URL(), "--group", "g", "--stream", "yes", "--stream-id", arn, "--to", "trim_horizon"}

	out, err := runCLI(ctx, args...)
	require.Error(t, err, out)
	t.Logf("without --yes: %v\n%s", err, out)
	assert.Contains(t, err.Error(), "pass --yes to confirm")
	assert.Contains(t, out, shard0+": "+p.String()+" -> (none)", "it shows what it would discard")
	assert.Contains(t, out, "would start at: trim_horizon")
	assert.Equal(t, p, groupCheckpoints(t, r.URL(), "g", arn)[shard0], "nothing written")

	out, err = runCLI(ctx, append(args, "--yes")...)
	require.NoError(t, err, out)
	assert.Empty(t, groupCheckpoints(t, r.URL(), "g", arn))
}
