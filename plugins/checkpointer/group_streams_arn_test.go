package checkpointer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestIntegrationGroupStreamsLeavesOutAGroupNamedGroupColonArn guards the
// reading that a group named "<g>:arn" leaks into show and export of group
// "<g>": its keys "{<g>:arn:arn:aws:…}" start like an ARN stream's of <g>.
func TestIntegrationGroupStreamsLeavesOutAGroupNamedGroupColonArn(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	b := backend{url: r.URL(), kind: KindSimple}
	ctx := t.Context()
	for group, streams := range map[string][]string{
		"g":       {arnOf("mine"), "by-name"},
		"g:arn":   {arnOf("theirs"), "named"},
		"g:arn:x": {arnOf("other")},
	} {
		c := newTestCheckpointer(t, b, group)
		for _, id := range streams {
			_, err := c.Stream(id).Join(ctx)
			require.NoError(t, err)
		}
	}
	got, err := newTestCheckpointer(t, b, "g").GroupStreams(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{arnOf("mine"), "by-name"}, got)
	got, err = newTestCheckpointer(t, b, "g:arn").GroupStreams(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{arnOf("theirs"), "named"}, got)
}
