package main

import (
	"debug/elf"
	"debug/macho"
	"runtime"
	"testing"
)

// elfMachines and machoCPUs are the header values of the platforms the
// release archives are built for (Makefile PLATFORMS).
var (
	elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	machoCPUs   = map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}
)

func hostMachine(t *testing.T) elf.Machine {
	t.Helper()
	m, ok := elfMachines[runtime.GOARCH]
	if !ok {
		t.Skipf("no ELF machine known for %s", runtime.GOARCH)
	}
	return m
}
