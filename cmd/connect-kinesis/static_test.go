package main

import (
	"debug/elf"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireStaticELF fails unless path is an ELF executable for machine that
// needs no dynamic loader and no shared library: one that runs in a FROM
// scratch image. A cgo build has a PT_INTERP (/lib64/ld-linux-x86-64.so.2)
// and DT_NEEDED entries (libc.so.6); such a binary fails in scratch with
// "no such file or directory", the loader's absence.
func requireStaticELF(t *testing.T, path string, machine elf.Machine) {
	t.Helper()
	f, err := elf.Open(path)
	require.NoError(t, err, "%s is an ELF file", path)
	defer f.Close()
	assert.Equal(t, machine, f.Machine, "%s is built for %v", path, machine)
	assert.Equal(t, elf.ET_EXEC, f.Type, "%s is an executable", path)
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "%s asks for a dynamic loader: it is dynamically linked (build with CGO_ENABLED=0)", path)
	}
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	assert.Empty(t, libs, "%s needs shared libraries (DT_NEEDED): it is dynamically linked (build with CGO_ENABLED=0)", path)
}

// TestBinaryIsStatic checks the binary under test, the one `make build`
// wrote (CONNECT_KINESIS_BIN) or the one TestMain built the same way.
func TestBinaryIsStatic(t *testing.T) {
	t.Parallel()
	requireStaticELF(t, binary, hostMachine(t))
}
