package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// createDatabase creates a fresh database next to the one adminDSN names and returns its DSN
// and a function that drops it.
func createDatabase(ctx context.Context, adminDSN, name string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return "", nil, fmt.Errorf("PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(adminDSN)
	if err != nil || u.Scheme == "" {
		return "", nil, fmt.Errorf("the PostgreSQL DSN must be a URL (postgres://...): %q", adminDSN)
	}
	u.Path = "/" + name
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for { // PostgreSQL may be restarting
			conn, err := pgx.Connect(ctx, adminDSN)
			if err == nil {
				_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
				conn.Close(ctx)
			}
			if err == nil || ctx.Err() != nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return u.String(), drop, nil
}

// integrityCheck runs PRAGMA integrity_check on a SQLite file; "ok" means intact.
func integrityCheck(path string) (string, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return "", err
	}
	defer db.Close()
	rows, err := db.Query("PRAGMA integrity_check")
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "; "), rows.Err()
}
