package kinesisx

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/failsafe-go/failsafe-go"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var fast = Backoff{MaxRetries: 3, InitialInterval: time.Millisecond, MaxInterval: 2 * time.Millisecond}

func TestRetryBuilderRetriesOnlyRetryable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		attempts int
	}{
		{"throttled is retried to the budget", &types.ProvisionedThroughputExceededException{}, 4},
		{"transient is retried to the budget", &types.InternalFailureException{}, 4},
		{"fatal is not retried", &types.ResourceNotFoundException{}, 1},
		{"expired iterator is not retried as sent", &types.ExpiredIteratorException{}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			_, err := failsafe.With(RetryBuilder[int](fast).Build()).WithContext(t.Context()).Get(func() (int, error) {
				calls++
				return 0, tc.err
			})
			assert.Equal(t, tc.attempts, calls)
			// The user sees what Kinesis said, not a wrapper of failsafe's.
			assert.ErrorIs(t, err, tc.err)
		})
	}
}

func TestRetryBuilderSucceedsAfterTransientFailures(t *testing.T) {
	calls := 0
	got, err := failsafe.With(RetryBuilder[string](fast).Build()).WithContext(t.Context()).Get(func() (string, error) {
		calls++
		if calls < 3 {
			return "", &types.LimitExceededException{}
		}
		return "ok", nil
	})
	require.NoError(t, err)
	assert.Equal(t, "ok", got)
	assert.Equal(t, 3, calls)
}

func TestRetryBuilderStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	calls := 0
	slow := Backoff{InitialInterval: time.Hour, MaxInterval: time.Hour}
	attempted := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := failsafe.With(RetryBuilder[int](slow).Build()).WithContext(ctx).Get(func() (int, error) {
			if calls++; calls == 1 {
				close(attempted)
			}
			return 0, &types.ProvisionedThroughputExceededException{}
		})
		done <- err
	}()
	// Cancel while the policy waits out its hour-long backoff after the
	// first, throttled attempt.
	select {
	case <-attempted:
	case <-time.After(5 * time.Second):
		t.Fatal("the first attempt was never made")
	}
	cancel()
	select {
	case err := <-done:
		assert.True(t, errors.Is(err, context.Canceled), "got %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("retry loop did not stop on cancel")
	}
	assert.Equal(t, 1, calls)
}

func TestBackoffFromParsed(t *testing.T) {
	spec := service.NewConfigSpec().Fields(RetryFields(DefaultBackoff)...)
	for _, tc := range []struct {
		name, yaml, wantErr string
		want                Backoff
	}{
		{name: "defaults", yaml: `{}`, want: DefaultBackoff},
		{name: "set", yaml: "max_retries: 7\nbackoff: {initial_interval: 50ms, max_interval: 1s, max_elapsed_time: 0s}",
			want: Backoff{MaxRetries: 7, InitialInterval: 50 * time.Millisecond, MaxInterval: time.Second}},
		{name: "negative retries", yaml: "max_retries: -1", wantErr: "field max_retries"},
		{name: "zero initial", yaml: "backoff: {initial_interval: 0s}", wantErr: "backoff.initial_interval"},
		{name: "max below initial", yaml: "backoff: {initial_interval: 2s, max_interval: 1s}", wantErr: "backoff.max_interval"},
		{name: "negative elapsed", yaml: "backoff: {max_elapsed_time: -1s}", wantErr: "backoff.max_elapsed_time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf, err := spec.ParseYAML(tc.yaml, nil)
			require.NoError(t, err)
			got, err := BackoffFromParsed(conf)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
