package postgres

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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
	if len(ms) == 0 {
		return nil, fmt.Errorf("no schema files embedded")
	}
	return ms, nil
}

// LatestSchemaVersion is the schema version this binary migrates to.
func LatestSchemaVersion() int {
	ms, err := migrations()
	if err != nil {
		return 0
	}
	return ms[len(ms)-1].version
}

// migrationLockKey names the advisory lock that serialises migrations of one schema. Hosts
// migrating different schemas of one database do not wait for each other.
func migrationLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("vigil schema migration\x00"))
	h.Write([]byte(schema))
	return int64(h.Sum64())
}

// migrate brings the schema to the latest known version in one transaction, so a failure
// leaves the previous version intact (PostgreSQL DDL is transactional). The transaction first
// takes an advisory lock, so hosts starting together apply each migration once: the later ones
// wait, then find the work done.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, logger *zap.Logger) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	latest := ms[len(ms)-1].version

	var from int
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		lockName := schema
		if lockName == "" {
			if err := tx.QueryRow(ctx, `SELECT COALESCE(current_schema(), '')`).Scan(&lockName); err != nil {
				return fmt.Errorf("migrate: read current schema: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockKey(lockName)); err != nil {
			return fmt.Errorf("migrate: take migration lock: %w", err)
		}
		if schema != "" {
			// Checked before creating: CREATE SCHEMA IF NOT EXISTS demands the CREATE
			// privilege on the database even when the schema exists.
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`,
				schema).Scan(&exists); err != nil {
				return fmt.Errorf("migrate: look up schema %q: %w", schema, err)
			}
			if !exists {
				if _, err := tx.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
					return fmt.Errorf("migrate: create schema %q: %w", schema, err)
				}
			}
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
			version INTEGER NOT NULL PRIMARY KEY,
			name    TEXT    NOT NULL
		)`); err != nil {
			return fmt.Errorf("migrate: create schema_version: %w", err)
		}
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&from); err != nil {
			return fmt.Errorf("migrate: read schema version: %w", err)
		}
		if from > latest {
			return fmt.Errorf("database schema version %d is newer than this binary supports (%d): "+
				"run a vigil release that knows version %d, or restore a backup", from, latest, from)
		}
		for _, m := range ms[from:] {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migrate: apply %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version, name) VALUES ($1, $2)`,
				m.version, m.name); err != nil {
				return fmt.Errorf("migrate: record %s: %w", m.name, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if from < latest {
		logger.Info("postgres schema migrated", zap.Int("from-version", from), zap.Int("to-version", latest))
	}
	return nil
}
