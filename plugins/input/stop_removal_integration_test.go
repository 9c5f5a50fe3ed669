package input

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// Guards the defect where a soft stop that came while a stream of a
// pattern was being removed waited for that removal before it stopped the
// other streams, and cut their readers short at its deadline: with a
// stuck output, no final commit, no release, no member removal. Driven as
// Benthos drives the input: batches read and never acknowledged (the
// output is stuck), then the context of ReadBatch cancelled (watchStop),
// then Close.
func TestIntegrationStopDuringAStreamRemovalReleasesEveryLease(t *testing.T) {
	t.Parallel()
	emu := testenv.SharedKinesisMock(t)
	red := testenv.NewRedis(t)
	client := emu.Client()
	p := uniquePrefix("tstoprm")
	gone, kept := p+"gone", p+"kept"
	arns := map[string]string{}
	for _, name := range []string{gone, kept} {
		arn := emu.MustCreateStream(t, name, 1)
		if arn == "" {
			arn = name
		}
		arns[name] = arn
		_, err := client.AddTagsToStream(t.Context(), &kinesis.AddTagsToStreamInput{StreamName: aws.String(name), Tags: map[string]string{"env": "prod"}})
		require.NoError(t, err)
		putKeyed(t, client, name, "a", 20)
	}

	const handoff, interval = 6 * time.Second, 5 * time.Second
	yaml := fmt.Sprintf(`
streams: [ %q ]
stream_tags: { env: prod }
stream_discovery_interval: %v
region: %s
endpoint: %s
credentials: { id: %s, secret: %s }
checkpoint:
  redis: { url: %s }
  group: g
  commit_period: 200ms
lease: { period: 3s, rebalance_period: 300ms, handoff_timeout: %v }
poll_interval: 200ms
idle_poll_interval: 200ms
`, p+"*", interval, testenv.Region, emu.Endpoint, testenv.AccessKey, testenv.SecretKey, red.URL(), handoff)
	conf, err := Spec().ParseYAML(yaml, nil)
	require.NoError(t, err)
	c, err := ConfigFromParsed(conf)
	require.NoError(t, err)
	logs := &lockedBuffer{}
	in := newFromConfig(c, service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))), nil)
	require.NoError(t, in.Connect(t.Context()))

	// The pipeline takes a batch of each stream and never acknowledges
	// it, as a stuck output does.
	readCtx, stopConsuming := context.WithCancel(context.Background())
	defer stopConsuming()
	held := make(chan string, 100)
	go func() {
		for {
			b, _, err := in.ReadBatch(readCtx)
			if err != nil {
				if readCtx.Err() != nil {
					return
				}
				continue
			}
			s, _ := b[0].MetaGet(MetaStream)
			held <- s
		}
	}()
	inFlight := map[string]bool{}
	deadline := time.After(2*interval + 30*time.Second)
	for !inFlight[gone] || !inFlight[kept] {
		select {
		case s := <-held:
			inFlight[s] = true
		case <-deadline:
			t.Fatalf("batches in flight of %v only: %s", inFlight, logs.String())
		}
	}

	// gone stops carrying the tag: the next listing removes it, and its
	// removal waits up to handoff_timeout for its batch in flight.
	_, err = client.RemoveTagsFromStream(t.Context(), &kinesis.RemoveTagsFromStreamInput{StreamName: aws.String(gone), TagKeys: []string{"env"}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		in.mu.Lock()
		s := in.sess
		in.mu.Unlock()
		return !slices.Contains(s.cons.FollowedStreams(), arns[gone])
	}, 2*interval+15*time.Second, 20*time.Millisecond, "the untagged stream's removal began")
	time.Sleep(500 * time.Millisecond)

	// Benthos stops consuming (SIGTERM), then calls Close.
	stopAt := time.Now()
	stopConsuming()
	closed := make(chan error, 1)
	var took time.Duration
	go func() {
		err := in.Close(context.Background())
		took = time.Since(stopAt)
		closed <- err
	}()

	cfg := checkpointer.DefaultConfig()
	cfg.RedisURL, cfg.Group = red.URL(), "g"
	ck, err := checkpointer.New(t.Context(), cfg, nil, nil)
	require.NoError(t, err)
	defer ck.Close()
	released := func(name string) bool {
		ls, err := ck.Stream(arns[name]).Leases(t.Context())
		require.NoError(t, err)
		for _, l := range ls {
			if l.Owner != "" {
				return false
			}
		}
		return len(ls) > 0
	}
	var keptReleased time.Duration
	for keptReleased == 0 && time.Since(stopAt) < handoff+closeGrace+5*time.Second {
		if released(kept) {
			keptReleased = time.Since(stopAt)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var closeErr error
	select {
	case closeErr = <-closed:
	case <-time.After(handoff + closeGrace + 5*time.Second):
		t.Fatal("Close did not return")
	}
	t.Logf("the stop took %v; %s's lease released %v after it", took.Round(100*time.Millisecond), kept, keptReleased.Round(100*time.Millisecond))
	assert.NoError(t, closeErr)
	assert.True(t, released(kept), "the lease of %s, not being removed, is released at the stop: %s", kept, logs.String())
	assert.True(t, released(gone), "the lease of %s, being removed at the stop, is released: %s", gone, logs.String())
	assert.NotZero(t, keptReleased, "%s's lease was never released", kept)
	assert.Less(t, keptReleased, handoff+2*time.Second, "%s's readers waited handoff_timeout for their batch, then released", kept)
	assert.Zero(t, logs.count("could not commit the final checkpoint"), logs.String())
}
