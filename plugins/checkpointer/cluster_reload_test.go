package checkpointer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
)

// TestClusterReloadOnlyAfterNoAnswer guards the reload hook's classifier:
// a call that got no answer from Redis (a refused dial, a cut connection,
// a timeout) asks for a slot-map reload, on a single call and on a
// pipeline; an answer from a live node (a script's error, redis.Nil, a
// missing permission) and a call its caller cancelled do not, as a reload
// after each would have every instance re-read the cluster's map on every
// empty read.
func TestClusterReloadOnlyAfterNoAnswer(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name   string
		err    error
		reload bool
	}{
		{"success", nil, false},
		{"redis.Nil", redis.Nil, false},
		{"a script's error", fmt.Errorf("running acquire: %w", redisError("ERR fenced")), false},
		{"NOPERM", redisError("NOPERM this user has no permissions to run the 'evalsha' command"), false},
		{"cancelled by the caller", fmt.Errorf("renewing: %w", context.Canceled), false},
		{"a refused dial", refused, true},
		{"a timeout", context.DeadlineExceeded, true},
		{"a cut connection", errors.New("use of closed network connection"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			h := clusterReloadHook{reload: func(context.Context) { n++ }}
			err := h.ProcessHook(func(context.Context, redis.Cmder) error { return tc.err })(t.Context(), redis.NewStatusCmd(t.Context(), "ping"))
			assert.Equal(t, tc.err, err, "the hook hands the call's error back unchanged")
			err = h.ProcessPipelineHook(func(context.Context, []redis.Cmder) error { return tc.err })(t.Context(), nil)
			assert.Equal(t, tc.err, err)
			want := 0
			if tc.reload {
				want = 2
			}
			assert.Equal(t, want, n, "reloads asked for after a call and a pipeline failing with %v", tc.err)
		})
	}
}

// redisError is an answer of Redis, as go-redis parses one.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}
