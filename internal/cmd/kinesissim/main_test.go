package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestCommandPrintsItsEndpointAfterCreatingItsStreams guards a first line
// that is not the endpoint, or printed before the streams of -stream and
// -pattern-streams exist: a script reads the line and starts its load.
func TestCommandPrintsItsEndpointAfterCreatingItsStreams(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-stream", "orders=3", "-pattern-streams", "ev-:3:2"}, w, io.Discard)
		w.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	endpoint, ok := strings.CutPrefix(strings.TrimSpace(line), "kinesissim listening on ")
	require.True(t, ok, line)
	assert.Regexp(t, `^http://127\.0\.0\.1:\d+$`, endpoint)

	c := testenv.KinesisClient(endpoint)
	streams, err := c.ListStreams(t.Context(), &kinesis.ListStreamsInput{})
	require.NoError(t, err)
	assert.Equal(t, []string{"ev-0", "ev-1", "ev-2", "orders"}, streams.StreamNames)
	shards, err := c.ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String("ev-2")})
	require.NoError(t, err)
	assert.Len(t, shards.Shards, 2)

	cancel()
	require.NoError(t, <-done)
}

// TestCommandRejectsMalformedStreamFlags guards a typo in a stream flag
// starting a simulator without the stream.
func TestCommandRejectsMalformedStreamFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-stream", "orders"}, {"-stream", "orders=0"}, {"-stream", "=3"},
		{"-pattern-streams", "ev-:3"}, {"-pattern-streams", "ev-:x:2"}, {"-pattern-streams", ":3:2"},
		{"stray"},
	} {
		err := run(t.Context(), args, io.Discard, io.Discard)
		assert.Error(t, err, "%v", args)
	}
}
