package query

import (
	"errors"
	"testing"
)

// FuzzParse checks that no input panics the parser, that errors are *Error with a position
// inside the input, and that the canonical form of a parsed query parses to the same query.
// `go test` runs only the seeds; fuzz with `go test -fuzz FuzzParse ./frontend/query`.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		``,
		`TaskQueue = "orders"`,
		`Status = 'Running' AND (HostName STARTS_WITH "h" OR BuildId IS NULL)`,
		`HeartbeatTime BETWEEN "2025-01-01T00:00:00Z" AND "2025-01-02T00:00:00.5+02:00"`,
		`Status NOT IN ("ShuttingDown", 'WORKER_STATUS_SHUTDOWN')`,
		"`HostName` <> 'it''s \\\"quoted\\\"'",
		`((((WorkerIdentity != "x"))))`,
		`StartTime >= "2025-01-01T00:00:00Z" or`,
		`"unterminated`,
	} {
		f.Add(seed)
	}
	w := testWorker()
	f.Fuzz(func(t *testing.T, text string) {
		q, err := Parse(text)
		if err != nil {
			var qerr *Error
			if !errors.As(err, &qerr) {
				t.Fatalf("Parse(%q) returned %T, want *Error", text, err)
			}
			if qerr.Pos < 0 || qerr.Pos > len(text) {
				t.Fatalf("Parse(%q): position %d outside the input", text, qerr.Pos)
			}
			return
		}
		canonical := q.String()
		again, err := Parse(canonical)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", canonical, text, err)
		}
		if again.String() != canonical {
			t.Fatalf("canonical form is not stable: %q then %q", canonical, again.String())
		}
		if q.Matches(w) != again.Matches(w) {
			t.Fatalf("%q and its canonical form %q disagree", text, canonical)
		}
	})
}
