package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Leftover is a process a child of this package left running: the child
// itself, or a process in its process group (node's own children, say).
type Leftover struct {
	// Name is the service the child was started as (redis-server, ...).
	Name string
	// Child is the PID this package started; PID the process still running.
	Child, PID int
}

func (l Leftover) String() string {
	if l.PID == l.Child {
		return fmt.Sprintf("%s pid %d", l.Name, l.PID)
	}
	return fmt.Sprintf("%s pid %d (in the group of pid %d)", l.Name, l.PID, l.Child)
}

// Leftovers reads the children recorded in dir (see PIDsDirEnv) and returns
// those still running, with any process still in their groups. It also
// returns how many children were recorded. A PID reused by a later process
// is told apart by its start time and not reported.
func Leftovers(dir string) (left []Leftover, recorded int, err error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reading the children recorded in %s: %w", dir, err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, 0, fmt.Errorf("reading the record of pid %d: %w", pid, err)
		}
		var (
			name  string
			start uint64
		)
		if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%s %d", &name, &start); err != nil {
			return nil, 0, fmt.Errorf("reading the record of pid %d: %w", pid, err)
		}
		recorded++
		for _, p := range StillRunning(pid, start) {
			left = append(left, Leftover{Name: name, Child: pid, PID: p})
		}
	}
	sort.Slice(left, func(i, j int) bool { return left[i].PID < left[j].PID })
	return left, recorded, nil
}

// StillRunning returns the PIDs still running of the child pid started at
// start (a /proc start time; 0 accepts any) and of every process in its
// process group. Every child of this package leads its own group, and Linux
// does not hand out a PID as long as a group of that number exists, so a
// group member is ours unless a new process took the PID itself.
func StillRunning(pid int, start uint64) []int {
	var out []int
	if st, err := readStat(pid); err == nil {
		if start != 0 && st.start != start {
			return nil // the PID now belongs to another process and group
		}
		if running(st) {
			out = append(out, pid)
		}
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range procs {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == pid {
			continue
		}
		if st, err := readStat(p); err == nil && st.pgrp == pid && running(st) {
			out = append(out, p)
		}
	}
	return out
}
