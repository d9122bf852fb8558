package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	_ "modernc.org/sqlite" // the driver vigil's own SQLite store uses
)

// sqliteStore upserts heartbeats into one SQLite table through a group commit: the first
// write opens a batch, which collects every write that arrives within the commit window, and
// is committed as one transaction; each write is answered once its batch is on disk. It is the
// least a server that keeps every heartbeat durable has to do per heartbeat: in WAL mode with
// synchronous=FULL, one fsync a batch, as vigil's store does.
type sqliteStore struct {
	db     *sql.DB
	upsert *sql.Stmt
	window time.Duration
	// With a log (openSQLite's foldEvery > 0) a heartbeat is appended to heartbeat_log, whose
	// keys only grow, so that a batch's rows share pages instead of each rewriting its own
	// worker's; every foldEvery the log is folded into worker_heartbeats (each worker's latest
	// row) and emptied, in one transaction.
	appendLog  *sql.Stmt
	foldEvery  time.Duration
	lastFolded time.Time

	reqs chan *putRequest
	quit chan struct{}
	done chan struct{}
}

// putRequest is one call's rows, and where its batch's outcome is sent.
type putRequest struct {
	rows []row
	done chan error // buffered: the committer never waits for a caller that gave up
}

var errClosed = errors.New("store closed")

const schema = `CREATE TABLE IF NOT EXISTS worker_heartbeats (
	worker_key TEXT PRIMARY KEY,
	heartbeat  BLOB NOT NULL
)`

const upsertSQL = `INSERT INTO worker_heartbeats (worker_key, heartbeat) VALUES (?, ?)
	ON CONFLICT (worker_key) DO UPDATE SET heartbeat = excluded.heartbeat`

const logSchema = `CREATE TABLE IF NOT EXISTS heartbeat_log (
	seq        INTEGER PRIMARY KEY,
	worker_key TEXT NOT NULL,
	heartbeat  BLOB NOT NULL
)`

const appendSQL = `INSERT INTO heartbeat_log (worker_key, heartbeat) VALUES (?, ?)`

// foldSQL moves each worker's latest logged heartbeat into worker_heartbeats; the log is
// emptied after it in the same transaction. (A crash between folds loses nothing: the log
// is on disk, and the next fold, or a reader, takes the latest row per worker from it.)
const foldSQL = `INSERT INTO worker_heartbeats (worker_key, heartbeat)
	SELECT worker_key, heartbeat FROM heartbeat_log
	WHERE seq IN (SELECT max(seq) FROM heartbeat_log GROUP BY worker_key)
	ON CONFLICT (worker_key) DO UPDATE SET heartbeat = excluded.heartbeat`

// openSQLite opens (creating) the database at path and starts its committer. With foldEvery
// > 0 heartbeats go to an append-only log folded into the table that often.
func openSQLite(path string, window, foldEvery time.Duration) (*sqliteStore, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	// One connection: SQLite has one writer, and the committer is it.
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		db.Close()
		return nil, fmt.Errorf("%s: journal_mode %q, want wal (%v)", path, mode, err)
	}
	upsert, err := db.Prepare(upsertSQL)
	if err != nil {
		db.Close()
		return nil, err
	}
	s := &sqliteStore{
		db: db, upsert: upsert, window: window, foldEvery: foldEvery, lastFolded: time.Now(),
		reqs: make(chan *putRequest), quit: make(chan struct{}), done: make(chan struct{}),
	}
	if foldEvery > 0 {
		if _, err := db.Exec(logSchema); err != nil {
			db.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if s.appendLog, err = db.Prepare(appendSQL); err != nil {
			db.Close()
			return nil, err
		}
	}
	go s.loop()
	return s, nil
}

// Put hands the rows to the committer and waits until their batch is committed.
func (s *sqliteStore) Put(ctx context.Context, rows []row) error {
	req := &putRequest{rows: rows, done: make(chan error, 1)}
	select {
	case s.reqs <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.quit:
		return errClosed
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop commits batch after batch until Close. While a batch commits, new writes wait to be
// received: they make the next batch.
func (s *sqliteStore) loop() {
	defer close(s.done)
	for {
		var first *putRequest
		select {
		case first = <-s.reqs:
		case <-s.quit:
			return
		}
		batch := []*putRequest{first}
		timer := time.NewTimer(s.window)
	collect:
		for {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			case <-timer.C:
				break collect
			case <-s.quit:
				timer.Stop()
				break collect
			}
		}
		err := s.commit(batch)
		for _, r := range batch {
			r.done <- err
		}
	}
}

// commit writes a batch in one transaction.
func (s *sqliteStore) commit(batch []*putRequest) (err error) {
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	stmt := tx.Stmt(s.upsert)
	if s.appendLog != nil {
		stmt = tx.Stmt(s.appendLog)
	}
	for _, r := range batch {
		for _, row := range r.rows {
			if _, err := stmt.Exec(row.key, row.data); err != nil {
				return err
			}
		}
	}
	if s.appendLog != nil && time.Since(s.lastFolded) >= s.foldEvery {
		if err := fold(tx); err != nil {
			return err
		}
		s.lastFolded = time.Now()
	}
	return tx.Commit()
}

// fold moves the log into worker_heartbeats and empties it.
func fold(tx *sql.Tx) error {
	if _, err := tx.Exec(foldSQL); err != nil {
		return fmt.Errorf("fold the log: %w", err)
	}
	_, err := tx.Exec(`DELETE FROM heartbeat_log`)
	return err
}

// Close commits what was collected, stops the committer and closes the database.
func (s *sqliteStore) Close() error {
	close(s.quit)
	<-s.done
	var foldErr, logErr error
	if s.appendLog != nil {
		foldErr = s.inTx(fold)
		logErr = s.appendLog.Close()
	}
	return errors.Join(foldErr, logErr, s.upsert.Close(), s.db.Close())
}

func (s *sqliteStore) inTx(fn func(*sql.Tx) error) error {
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
