//go:build linux

package chaos

import "syscall"

// diesWithParent has the kernel SIGKILL a child when its parent dies.
//
// Linux sends the parent-death signal when the thread that forked the child
// exits, not the process. The Go runtime ends a thread only when a goroutine
// that locked it (runtime.LockOSThread) returns without unlocking it; no
// goroutine of this package or of os/exec does that, so the thread that
// started a child lives as long as the process and the signal comes when
// the process dies, however it dies.
func diesWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
