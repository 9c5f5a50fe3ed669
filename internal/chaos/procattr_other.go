//go:build !linux

package chaos

import "syscall"

// diesWithParent is Linux-only (Pdeathsig); elsewhere cleanup alone ends
// the children.
func diesWithParent() *syscall.SysProcAttr { return nil }
