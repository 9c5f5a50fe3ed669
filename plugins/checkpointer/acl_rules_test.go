package checkpointer

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShippedACLRulesAreExactlyWhatTheCodeRuns compares each user's
// commands in config/deploy/redis-acl.conf with the commands its role runs:
// those its scripts call (read from lua/, the prelude included) and those
// sent directly. A command the file lacks fails the integration tests
// (Redis refuses it); this test fails on one the file grants that no code
// of the role runs, so the rules stay least privilege.
func TestShippedACLRulesAreExactlyWhatTheCodeRuns(t *testing.T) {
	// Sent directly: the connection check and the scripts themselves
	// (EVALSHA, EVAL after NOSCRIPT), and a Cluster client's routing.
	common := []string{"PING", "EVALSHA", "EVAL", "CLUSTER|SLOTS", "COMMAND"}
	viewerScripts := []string{"closed", "leases", "now", "snapshot"}
	// Read directly by show and export: checkpoints and starts (HGET,
	// HGETALL), progress and hand-off requests (HGETALL), live members
	// without pruning (ZRANGEBYSCORE), whether the group has state (EXISTS),
	// the group's streams (SCAN, GroupStreams).
	viewerDirect := []string{"HGET", "HGETALL", "ZRANGEBYSCORE", "EXISTS", "SCAN"}
	roles := map[string]struct {
		scripts, direct []string
	}{
		"connect-kinesis-input": {
			scripts: append([]string{"permission_check"}, inputScripts...),
			// The replica check and the wait for replicas (INFO, WAIT);
			// a shard's own start comes with its take's script.
			direct: []string{"INFO", "WAIT"},
		},
		"connect-kinesis-viewer": {scripts: viewerScripts, direct: viewerDirect},
		// A reset, import, delete or restore of marks waits for replicas as
		// a commit does (INFO, WAIT).
		"connect-kinesis-admin": {scripts: append([]string{"reset", "delete", "restore_delivered"}, viewerScripts...), direct: append(slices.Clone(viewerDirect), "INFO", "WAIT")},
	}

	granted := shippedACLCommands(t)
	require.Equal(t, slices.Sorted(maps.Keys(roles)), slices.Sorted(maps.Keys(granted)), "the file's users")
	for user, role := range roles {
		want := map[string]bool{}
		for _, name := range role.scripts {
			_, ok := scripts[name]
			require.True(t, ok, "script %s exists", name)
		}
		for _, c := range append(append(common, role.direct...), scriptCommands(role.scripts)...) {
			want[c] = true
		}
		assert.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(granted[user])),
			"the commands of %s in config/deploy/redis-acl.conf", user)
	}
}

// shippedACLCommands reads each user's +commands from the shipped file,
// checking that every user starts from no command, no channel and the
// default key prefix.
func shippedACLCommands(t *testing.T) map[string]map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../../config/deploy/redis-acl.conf")
	require.NoError(t, err)
	out := map[string]map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "user" {
			continue
		}
		cmds := map[string]bool{}
		for _, rule := range f[2:] {
			if c, ok := strings.CutPrefix(rule, "+"); ok {
				cmds[strings.ToUpper(c)] = true
			}
		}
		assert.Subset(t, f, []string{"on", "resetchannels", "~" + DefaultKeyPrefix + ":*", "-@all"}, "the rules of %s", f[1])
		out[f[1]] = cmds
	}
	return out
}
