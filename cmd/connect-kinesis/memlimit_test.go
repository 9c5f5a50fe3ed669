package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeCgroup is a container limit read from a memory.max file of cgroup v2
// ("max" for none), as the kernel shows it to a container.
func fakeCgroup(t *testing.T, content string) memlimit.Provider {
	path := filepath.Join(t.TempDir(), "memory.max")
	require.NoError(t, os.WriteFile(path, []byte(content+"\n"), 0o600))
	return func() (uint64, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, err
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, memlimit.ErrNoLimit
		}
		return strconv.ParseUint(s, 10, 64)
	}
}

// keepMemoryLimit restores the process' Go memory limit after a test that
// sets it.
func keepMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
}

func TestMemoryLimitFromContainer(t *testing.T) {
	keepMemoryLimit(t)
	t.Setenv("GOMEMLIMIT", "")
	m := setMemoryLimit(fakeCgroup(t, strconv.Itoa(512<<20)))
	container := float64(512 << 20)
	want := int64(container * containerMemoryRatio)
	assert.Equal(t, want, debug.SetMemoryLimit(-1), "the Go memory limit is 90% of the container's")
	assert.Equal(t, "Go memory limit set to 460.8MiB, 90% of the container's memory limit (512.0MiB, from its cgroup); set GOMEMLIMIT to choose another", m.message())
}

func TestMemoryLimitNoContainerLimit(t *testing.T) {
	keepMemoryLimit(t)
	t.Setenv("GOMEMLIMIT", "")
	debug.SetMemoryLimit(math.MaxInt64)
	m := setMemoryLimit(fakeCgroup(t, "max"))
	assert.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1))
	assert.Equal(t, "Go memory limit none: GOMEMLIMIT is unset and the container sets no memory limit; without a limit the heap may grow to about twice what is live", m.message())
}

func TestMemoryLimitGOMEMLIMITWins(t *testing.T) {
	keepMemoryLimit(t)
	// The runtime reads GOMEMLIMIT when the process starts; a test sets the
	// variable and the limit it would have set.
	t.Setenv("GOMEMLIMIT", "300MiB")
	debug.SetMemoryLimit(300 << 20)
	read := false
	m := setMemoryLimit(func() (uint64, error) { read = true; return 512 << 20, nil })
	assert.False(t, read, "the container's limit is not read when GOMEMLIMIT is set")
	assert.Equal(t, int64(300<<20), debug.SetMemoryLimit(-1), "GOMEMLIMIT's limit stays")
	assert.Equal(t, "Go memory limit 300.0MiB, from GOMEMLIMIT", m.message())
}
