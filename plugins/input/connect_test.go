package input

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// connectInput calls Connect once and closes what connected.
func connectInput(t *testing.T, in *kinesisInput) error {
	t.Helper()
	err := in.Connect(t.Context())
	if err == nil {
		require.NoError(t, in.Close(t.Context()))
	}
	return err
}

func newInputFromYAML(t *testing.T, yaml string) *kinesisInput {
	t.Helper()
	conf, err := Spec().ParseYAML(yaml, nil)
	require.NoError(t, err)
	c, err := ConfigFromParsed(conf)
	require.NoError(t, err)
	return newFromConfig(c, nil, nil)
}

// An error that will not pass by itself (Redis refusing the password, no
// region) is retried less and less often, up to a bound, and says so and
// names what refused; one that may pass (Redis not listening) is left to
// Benthos' own retry, about once a second. Issue 39 item 3: every error
// was retried about once a second, forever, as "Failed to connect to
// kinesis: connecting to the checkpoint store: ...".
func TestConnectBacksOffOnPermanentErrors(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, testenv.RedisOptions{Password: "right"})
	base := "streams: [ orders ]\nregion: us-east-1\nendpoint: http://127.0.0.1:1\ncredentials: { id: a, secret: b }\n"

	t.Run("wrong Redis password", func(t *testing.T) {
		in := newInputFromYAML(t, base+fmt.Sprintf("checkpoint: { redis: { url: 'redis://nobody:wrong@%s' }, group: g }\n", r.Addr))
		var waits []time.Duration
		for range 6 {
			err := connectInput(t, in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "WRONGPASS")
			assert.Contains(t, err.Error(), "Redis")
			assert.Contains(t, err.Error(), "retrying in")
			assert.NotContains(t, err.Error(), "wrong", "the password is never quoted")
			var boff *service.ErrBackOff
			require.True(t, errors.As(err, &boff), "Benthos is told to wait: %v", err)
			waits = append(waits, boff.Wait)
		}
		t.Log(waits, in.Connect(t.Context()))
		assert.Equal(t, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}, waits)
	})
	t.Run("Redis not listening", func(t *testing.T) {
		port, err := testenv.FreePort()
		require.NoError(t, err)
		in := newInputFromYAML(t, base+fmt.Sprintf("checkpoint: { redis: { url: 'redis://127.0.0.1:%d' }, group: g }\n", port))
		err = connectInput(t, in)
		require.Error(t, err)
		var boff *service.ErrBackOff
		assert.False(t, errors.As(err, &boff), "a transient error keeps Benthos' own retry: %v", err)
		assert.Contains(t, err.Error(), "Redis")
	})
}
