package checkpointer

import (
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestScriptsEmbedded guards the embedding: every body in lua/ is a script
// the package runs, and no {{field}} is left unfilled in any source.
func TestScriptsEmbedded(t *testing.T) {
	files, err := fs.Glob(luaFiles, "lua/*.lua")
	require.NoError(t, err)
	var bodies []string
	for _, f := range files {
		if name := strings.TrimSuffix(path.Base(f), ".lua"); name != "prelude" {
			bodies = append(bodies, name)
		}
	}
	names := make([]string, 0, len(scripts))
	for name := range scripts {
		names = append(names, name)
	}
	assert.ElementsMatch(t, bodies, names, "every lua/*.lua but the prelude is one script")
	for name, s := range scripts {
		src := s.src
		assert.True(t, strings.HasPrefix(src, "\n"+luaPrelude), "%s starts with the prelude", name)
		assert.NotContains(t, src, "{{", "%s has a field left unfilled", name)
		assert.Greater(t, len(src), len(luaPrelude)+len("\n\n"), "%s has a body", name)
	}
}

// TestIntegrationScriptsLoad has a real redis-server compile every script
// (SCRIPT LOAD), so a Lua syntax error in any file fails here rather than on
// the first call that runs it, and checks Redis caches each under the SHA1
// Script.Run asks for.
func TestIntegrationScriptsLoad(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	c := r.Client()
	t.Cleanup(func() { _ = c.Close() })
	require.NotEmpty(t, scripts)
	for name, s := range scripts {
		sha, err := c.ScriptLoad(t.Context(), s.src).Result()
		if assert.NoError(t, err, "loading %s", name) {
			assert.Equal(t, s.script.Hash(), sha, name)
		}
	}
}
