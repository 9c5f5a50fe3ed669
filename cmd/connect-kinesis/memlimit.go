package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/redpanda-data/benthos/v4/public/service"
)

// containerMemoryRatio is the share of the container's memory limit taken
// as the Go memory limit: the rest is for what the Go runtime does not
// count (thread stacks, the binary, memory not yet returned to the OS).
const containerMemoryRatio = 0.9

// memoryLimit is what setMemoryLimit did, to be logged once the Benthos
// logger exists.
type memoryLimit struct {
	goLimit   int64  // the Go memory limit now; math.MaxInt64 is none
	container uint64 // the container's limit read, 0 if none was read
	source    string // "GOMEMLIMIT", "container", "AUTOMEMLIMIT=off" or "none"
	err       error  // why the container's limit could not be read
}

// setMemoryLimit sets the Go memory limit from the container's memory
// limit (cgroup v2 or v1, read by automemlimit) when GOMEMLIMIT is unset,
// so that the collector works harder before the kernel kills the process
// instead of letting the heap grow to twice what is live. containerLimit is
// memlimit.FromCgroup outside tests.
func setMemoryLimit(containerLimit memlimit.Provider) memoryLimit {
	if os.Getenv("GOMEMLIMIT") != "" {
		return memoryLimit{goLimit: debug.SetMemoryLimit(-1), source: "GOMEMLIMIT"}
	}
	if os.Getenv("AUTOMEMLIMIT") == "off" {
		return memoryLimit{goLimit: debug.SetMemoryLimit(-1), source: "AUTOMEMLIMIT=off"}
	}
	var m memoryLimit
	read := func() (uint64, error) {
		v, err := containerLimit()
		if err == nil {
			m.container = v
		}
		return v, err
	}
	limit, err := memlimit.Set(memlimit.WithProvider(read), memlimit.WithRatio(containerMemoryRatio))
	m.goLimit = limit
	switch {
	case err != nil:
		m.source, m.err = "none", err
	case m.container == 0 || limit == math.MaxInt64:
		m.source = "none"
	default:
		m.source = "container"
	}
	return m
}

// log says at INFO what the Go memory limit is and where it came from.
func (m memoryLimit) log(l *service.Logger) {
	l.With("go_memory_limit", m.goLimit, "container_memory_limit", m.container).Info(m.message())
}

func (m memoryLimit) message() string {
	switch m.source {
	case "GOMEMLIMIT":
		return fmt.Sprintf("Go memory limit %s, from GOMEMLIMIT", limitText(m.goLimit))
	case "AUTOMEMLIMIT=off":
		return fmt.Sprintf("Go memory limit %s: AUTOMEMLIMIT=off, the container's memory limit is not read", limitText(m.goLimit))
	case "container":
		return fmt.Sprintf("Go memory limit set to %s, %.0f%% of the container's memory limit (%s, from its cgroup); set GOMEMLIMIT to choose another",
			sizeText(m.goLimit), containerMemoryRatio*100, sizeText(int64(m.container)))
	}
	reason := "the container sets no memory limit"
	if m.err != nil && !errors.Is(m.err, memlimit.ErrNoLimit) {
		reason = fmt.Sprintf("the container's memory limit could not be read (%v)", m.err)
	}
	return fmt.Sprintf("Go memory limit %s: GOMEMLIMIT is unset and %s; without a limit the heap may grow to about twice what is live", limitText(m.goLimit), reason)
}

func limitText(n int64) string {
	if n == math.MaxInt64 {
		return "none"
	}
	return sizeText(n)
}

// sizeText writes n bytes in MiB (GiB from 10 GiB up).
func sizeText(n int64) string {
	if n >= 10<<30 {
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
}
