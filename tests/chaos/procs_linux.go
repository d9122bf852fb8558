package chaos

import "syscall"

// dieWithParent makes a subprocess die with the suite, so that an interrupted run leaves no
// server or worker behind.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
