package input

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withMemoryLimit makes the process's memory limit, as the default budget
// sees it, limit (0: none) from source, for one test.
func withMemoryLimit(t *testing.T, limit int64, source string) {
	prev := memoryLimit
	memoryLimit = func() (int64, string) { return limit, source }
	t.Cleanup(func() { memoryLimit = prev })
}

func TestDefaultMaxBufferedBytesFollowsTheMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limit  int64
		source string
		extra  string
		want   int64
		note   string
	}{
		{"GOMEMLIMIT 300MiB", 300 << 20, "GOMEMLIMIT", "", 75 << 20,
			"max_buffered_bytes is unset: the input's byte budget is 75.0MiB, a quarter of GOMEMLIMIT (300.0MiB), at most 256.0MiB; set max_buffered_bytes to choose another"},
		{"a container of 512MiB", 512 << 20, "the container's memory limit", "", 128 << 20,
			"max_buffered_bytes is unset: the input's byte budget is 128.0MiB, a quarter of the container's memory limit (512.0MiB), at most 256.0MiB; set max_buffered_bytes to choose another"},
		{"a large limit", 4 << 30, "the Go memory limit", "", 256 << 20,
			"max_buffered_bytes is unset: the input's byte budget is 256.0MiB, a quarter of the Go memory limit (4096.0MiB), at most 256.0MiB; set max_buffered_bytes to choose another"},
		{"no limit", 0, "", "", 256 << 20,
			"max_buffered_bytes is unset and the process has no memory limit (no GOMEMLIMIT, no container limit): the input's byte budget is 256.0MiB"},
		{"null is unset", 512 << 20, "the container's memory limit", "max_buffered_bytes: null\n", 128 << 20,
			"max_buffered_bytes is unset: the input's byte budget is 128.0MiB, a quarter of the container's memory limit (512.0MiB), at most 256.0MiB; set max_buffered_bytes to choose another"},
		{"an explicit value wins", 300 << 20, "GOMEMLIMIT", "max_buffered_bytes: 200MiB\n", 200 << 20, ""},
		{"an explicit 0 wins", 300 << 20, "GOMEMLIMIT", "max_buffered_bytes: 0\n", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withMemoryLimit(t, tc.limit, tc.source)
			conf, err := Spec().ParseYAML(minimalYAML+tc.extra, nil)
			require.NoError(t, err)
			c, err := ConfigFromParsed(conf)
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.Consumer.MaxBufferedBytes)
			assert.Equal(t, tc.note, c.budgetNote)
		})
	}
}

func TestMemoryLimitReadsGOMEMLIMIT(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	// The runtime reads GOMEMLIMIT at start: set both, as a process started
	// with GOMEMLIMIT=300MiB has them.
	t.Setenv("GOMEMLIMIT", "300MiB")
	debug.SetMemoryLimit(300 << 20)
	limit, source := memoryLimit()
	assert.Equal(t, int64(300<<20), limit)
	assert.Equal(t, "GOMEMLIMIT", source)

	t.Setenv("GOMEMLIMIT", "")
	debug.SetMemoryLimit(math.MaxInt64)
	limit, _ = memoryLimit()
	assert.NotEqual(t, int64(300<<20), limit, "with no Go memory limit, the container's (or none) counts")
}
