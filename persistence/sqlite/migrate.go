package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"go.uber.org/zap"

	"github.com/vigilhq/vigil/persistence/internal/sqlcommon"
)

//go:embed schema/*.sql
var schemaFS embed.FS

// LatestSchemaVersion is the schema version this binary migrates to.
func LatestSchemaVersion() int {
	return sqlcommon.LatestSchemaVersion(schemaFS)
}

// migrate brings the database to the latest known schema version in one transaction, so a
// crash mid-migration leaves the previous version intact. The write transaction is IMMEDIATE,
// so two processes opening the same new file cannot both apply version 1.
func migrate(ctx context.Context, db *sql.DB, logger *zap.Logger) (err error) {
	ms, err := sqlcommon.ReadMigrations(schemaFS)
	if err != nil {
		return err
	}
	latest := ms[len(ms)-1].Version

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()

	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT    NOT NULL
	)`); err != nil {
		return fmt.Errorf("migrate: create schema_version: %w", err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&current); err != nil {
		return fmt.Errorf("migrate: read schema version: %w", err)
	}
	if err := sqlcommon.CheckSchemaVersion(current, latest); err != nil {
		return err
	}
	if current == latest {
		return tx.Commit()
	}

	for _, m := range ms[current:] {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migrate: apply %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version, name) VALUES (?, ?)`,
			m.Version, m.Name); err != nil {
			return fmt.Errorf("migrate: record %s: %w", m.Name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	logger.Info("sqlite schema migrated", zap.Int("from-version", current), zap.Int("to-version", latest))
	return nil
}
