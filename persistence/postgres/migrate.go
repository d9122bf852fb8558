package postgres

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/persistence/internal/sqlcommon"
)

//go:embed schema/*.sql
var schemaFS embed.FS

// LatestSchemaVersion is the schema version this binary migrates to.
func LatestSchemaVersion() int {
	return sqlcommon.LatestSchemaVersion(schemaFS)
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
	ms, err := sqlcommon.ReadMigrations(schemaFS)
	if err != nil {
		return err
	}
	latest := ms[len(ms)-1].Version

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
		if err := sqlcommon.CheckSchemaVersion(from, latest); err != nil {
			return err
		}
		for _, m := range ms[from:] {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migrate: apply %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version, name) VALUES ($1, $2)`,
				m.Version, m.Name); err != nil {
				return fmt.Errorf("migrate: record %s: %w", m.Name, err)
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
