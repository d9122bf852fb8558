package sqlite

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
)

// ReleaseMemory gives back the memory SQLite holds for data no longer in use: it closes the
// idle read connections (the pool reopens them on demand) and asks the write and checkpoint
// connections to drop the unused pages of their caches (PRAGMA shrink_memory).
//
// That memory is outside the Go heap: modernc.org/sqlite allocates through modernc.org/libc,
// which maps it directly. After a fleet of workers has come and gone, each connection keeps
// its page cache full (a 4 KiB page takes an 8 KiB slot there, so the default 2,000 KiB
// cache holds about 4 MiB), which a server that has never worked does not have. The Store
// registers ReleaseMemory with memrelease, which calls it after a large eviction, when the
// process gives its memory back anyway; under steady load it does not run.
func (s *Store) ReleaseMemory(ctx context.Context) error {
	defer s.memoryReleases.Add(1)
	// Idle connections beyond the idle limit are closed at once; the limit then goes back, so
	// that the connections reopened by later reads stay pooled again.
	s.readDB.SetMaxIdleConns(-1)
	s.readDB.SetMaxIdleConns(s.maxReadConns)

	var errs []error
	if _, err := s.writeDB.ExecContext(ctx, "PRAGMA shrink_memory"); err != nil {
		errs = append(errs, fmt.Errorf("write connection: %w", err))
	}
	if s.checkpoints != nil {
		if _, err := s.checkpoints.db.ExecContext(ctx, "PRAGMA shrink_memory"); err != nil {
			errs = append(errs, fmt.Errorf("checkpoint connection: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlite: release memory: %w", err)
	}
	return nil
}

// releaseMemoryHook is ReleaseMemory as memrelease runs it: bounded, and a failure (the write
// connection busy for longer than the timeout) only logged, since nothing depends on it.
func (s *Store) releaseMemoryHook() {
	ctx, cancel := context.WithTimeout(context.Background(), releaseMemoryTimeout)
	defer cancel()
	if err := s.ReleaseMemory(ctx); err != nil {
		s.logger.Info("sqlite memory not released", zap.Error(err))
	}
}
