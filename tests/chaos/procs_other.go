//go:build !linux

package chaos

import "syscall"

func dieWithParent() *syscall.SysProcAttr { return nil }
