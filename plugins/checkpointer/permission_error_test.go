package checkpointer

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// replyErr is an error reply as go-redis returns it.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// TestPermissionErrorNamesWhatWasRefused reads the refusals of Redis 7.0
// (which the integration tests meet) and of 7.2 and later (other words).
func TestPermissionErrorNamesWhatWasRefused(t *testing.T) {
	commit := scripts["commit"]
	srcLines := strings.Split(commit.src, "\n")
	hsetAt, bodyStart := 0, strings.Count("\n"+luaPrelude+"\n", "\n")
	for i, l := range srcLines {
		if i >= bodyStart && strings.Contains(l, "redis.call('HSET'") {
			hsetAt = i + 1
			break
		}
	}
	require.NotZero(t, hsetAt, "commit.lua calls HSET")
	sha := commit.script.Hash()

	tests := []struct {
		name, reply string
		cmd         string
		want        *PermissionError // nil: not a refusal
	}{
		{name: "7.0 command", cmd: "evalsha", reply: "NOPERM this user has no permissions to run the 'evalsha' command",
			want: &PermissionError{Command: "EVALSHA"}},
		{name: "7.2 command", cmd: "ping", reply: "NOPERM User ck has no permissions to run the 'ping' command",
			want: &PermissionError{Command: "PING"}},
		{name: "7.0 key", cmd: "hgetall", reply: "NOPERM this user has no permissions to access one of the keys used as arguments",
			want: &PermissionError{Command: "HGETALL", Key: true}},
		{name: "7.2 key", cmd: "hget", reply: "NOPERM No permissions to access a key",
			want: &PermissionError{Command: "HGET", Key: true}},
		{name: "7.0 in a script", cmd: "evalsha",
			reply: fmt.Sprintf("ERR The user executing the script can't run this command or subcommand script: %s, on @user_script:%d.", sha, hsetAt),
			want:  &PermissionError{Command: "HSET", Script: "commit.lua", Line: hsetAt - bodyStart}},
		{name: "7.2 in a script", cmd: "evalsha",
			reply: fmt.Sprintf("ERR ACL failure in script: User ck has no permissions to run the 'hset' command script: %s, on @user_script:%d.", sha, hsetAt),
			want:  &PermissionError{Command: "HSET", Script: "commit.lua", Line: hsetAt - bodyStart}},
		{name: "7.0 key in the prelude", cmd: "evalsha",
			reply: fmt.Sprintf("ERR The user executing the script can't access at least one of the keys mentioned in the command arguments script: %s, on @user_script:3.", sha),
			want:  &PermissionError{Command: "TIME", Key: true, Script: "prelude.lua", Line: 2}},
		{name: "wrong password", cmd: "hello", reply: "WRONGPASS invalid username-password pair or user is disabled."},
		{name: "another error", cmd: "evalsha", reply: "ERR FORGOT abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reply := replyErr(tt.reply)
			got := permissionError(redis.NewCmd(t.Context(), tt.cmd), reply)
			if tt.want == nil {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			tt.want.Reply = reply
			assert.Equal(t, tt.want, got)
			assert.True(t, errors.Is(got, ErrNoPermission))
			assert.Contains(t, got.Error(), "docs/deploy.md")
			assert.Contains(t, got.Error(), tt.want.Command)
		})
	}
}
