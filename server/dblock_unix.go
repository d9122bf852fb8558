//go:build unix

package server

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// dbLock is an exclusive advisory lock on a SQLite database, held by the one vigil process
// that serves it: SQLite would let two processes open it and both would think they own every
// shard. The kernel releases it when the process exits, however it exits.
type dbLock struct{ f *os.File }

// lockDatabase locks path's lock file (path + ".lock"), or says who holds it.
func lockDatabase(path string) (*dbLock, error) {
	name := path + ".lock"
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("lock database: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(name)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &DatabaseInUseError{Path: path, Holder: strings.TrimSpace(string(holder))}
		}
		return nil, fmt.Errorf("lock database %s: %w", name, err)
	}
	host, _ := os.Hostname()
	_ = f.Truncate(0)
	_, _ = f.WriteAt(fmt.Appendf(nil, "pid %d on %s since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339)), 0)
	return &dbLock{f: f}, nil
}

func (l *dbLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Truncate(0)
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}
