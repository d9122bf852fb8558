package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

//go:embed schema/*.sql
var schemaFS embed.FS

// migration is one schema file, schema/NNNN_name.sql, which takes the schema to version NNNN.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order. Versions must run 1, 2, 3, ...
// without gaps: a gap would mean a file went missing from the build.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(schemaFS, "schema")
	if err != nil {
		return nil, fmt.Errorf("read embedded schema: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		name := e.Name()
		prefix, _, ok := strings.Cut(name, "_")
		if !ok || path.Ext(name) != ".sql" {
			return nil, fmt.Errorf("schema file %q is not named NNNN_name.sql", name)
		}
		v, err := strconv.Atoi(prefix)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("schema file %q is not named NNNN_name.sql", name)
		}
		body, err := schemaFS.ReadFile("schema/" + name)
		if err != nil {
			return nil, fmt.Errorf("read schema file %q: %w", name, err)
		}
		ms = append(ms, migration{version: v, name: name, sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("schema files skip from version %d to %d (%s)", i, m.version, m.name)
		}
	}
	return ms, nil
}

// LatestSchemaVersion is the schema version this binary migrates to.
func LatestSchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// migrate brings the database to the latest known schema version in one transaction, so a
// crash mid-migration leaves the previous version intact. The write transaction is IMMEDIATE,
// so two processes opening the same new file cannot both apply version 1.
func migrate(ctx context.Context, db *sql.DB, logger *zap.Logger) (err error) {
	ms, err := migrations()
	if err != nil {
		return err
	}
	latest := ms[len(ms)-1].version

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
	if current > latest {
		return fmt.Errorf("database schema version %d is newer than this binary supports (%d): "+
			"run a vigil release that knows version %d, or restore a backup", current, latest, current)
	}
	if current == latest {
		return tx.Commit()
	}

	for _, m := range ms[current:] {
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migrate: apply %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version, name) VALUES (?, ?)`,
			m.version, m.name); err != nil {
			return fmt.Errorf("migrate: record %s: %w", m.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	logger.Info("sqlite schema migrated", zap.Int("from-version", current), zap.Int("to-version", latest))
	return nil
}
