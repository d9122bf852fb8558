package sqlite

import (
	"errors"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The list page token's format byte (see sqlcommon.EncodePageToken). It differs from the
// PostgreSQL backend's, so a token cannot wander between backends unnoticed.
const pageTokenVersion = 1

func sqliteCode(err error) (int, bool) {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff, true
	}
	return 0, false
}

// isConstraint reports a constraint violation, which fails the statement (and so the write that
// issued it) but leaves the transaction usable.
func isConstraint(err error) bool {
	code, ok := sqliteCode(err)
	return ok && code == sqlite3.SQLITE_CONSTRAINT
}

func isNotADatabase(err error) bool {
	code, ok := sqliteCode(err)
	return ok && (code == sqlite3.SQLITE_NOTADB || code == sqlite3.SQLITE_CORRUPT)
}
