package ops

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResetHelpNamesTheFlagsPlaceholderAndRequired guards issue 39 item 12:
// `checkpoints reset --help` showed `--to show --json` (a backtick pair in
// the usage became the placeholder) and no flag said it was required.
func TestResetHelpNamesTheFlagsPlaceholderAndRequired(t *testing.T) {
	for _, sub := range []string{"show", "reset", "import", "export", "delete"} {
		t.Run(sub, func(t *testing.T) {
			out, err := runCLI(t.Context(), sub, "--help")
			require.NoError(t, err)
			if sub == "reset" {
				t.Logf("reset --help:\n%s", out)
				assert.Regexp(t, `--to MODE\s`, out)
				assert.NotContains(t, out, "--to show --json")
				assert.Regexp(t, `--to MODE\s+.*\(required\)`, out)
				assert.Regexp(t, `--yes\s+.*`, out)
			}
			required := []string{"redis-url", "group", "stream"}
			if sub == "show" || sub == "export" {
				// Without --stream they work on every stream of the group.
				required = required[:2]
				assert.NotRegexp(t, `--stream value\s+[^\n]*\(required\)`, out)
			}
			if sub == "reset" {
				// A set export restores every stream of its file.
				required = required[:2]
				assert.Regexp(t, `--stream value\s+[^\n]*required, except with --to sequences=FILE of an export of several streams`, out)
			}
			for _, flag := range required {
				assert.Regexp(t, regexp.MustCompile(`--`+flag+` value\s+[^\n]*\(required\)`), out, "--%s says it is required", flag)
			}
			assert.NotRegexp(t, `--region value\s+[^\n]*\(required\)`, out)
		})
	}
}

// TestCLIErrorsNameFlags guards issue 39 item 12: the command's errors
// named config fields (`field checkpoint.redis.url`, "set `region`") where
// the operator passes flags.
func TestCLIErrorsNameFlags(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no region", []string{"show", "--redis-url", "redis://127.0.0.1:1", "--group", "g", "--stream", "s"},
			[]string{"flag --region", "pass --region"}},
		{"bad redis url", []string{"show", "--redis-url", "http://127.0.0.1:1", "--group", "g", "--stream", "s", "--region", "us-east-1"},
			[]string{"flag --redis-url"}},
		{"unreachable redis", []string{"show", "--redis-url", "redis://127.0.0.1:1", "--group", "g", "--stream", "s", "--stream-id", "arn:aws:kinesis:us-east-1:000000000000:stream/s"},
			[]string{"flag --redis-url: reaching Redis"}},
		{"empty group", []string{"show", "--redis-url", "redis://127.0.0.1:1", "--group", "", "--stream", "s", "--region", "us-east-1"},
			[]string{"--group"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCLI(t.Context(), tc.args...)
			require.Error(t, err, out)
			t.Logf("error: %v", err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "field ")
			assert.NotContains(t, err.Error(), "`region`")
			assert.False(t, strings.Contains(err.Error(), "checkpoint.redis"), "names a config field: %v", err)
		})
	}
}
