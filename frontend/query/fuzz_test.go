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

// FuzzParseActivities is FuzzParse for activity queries with custom search attributes and
// clauses; the canonical form must also order and filter alike.
func FuzzParseActivities(f *testing.F) {
	for _, seed := range []string{
		`Amount BETWEEN -5 AND "7" AND Ratio >= 0.25 ORDER BY Amount DESC, StartTime`,
		`Tags IN ("a", 'b') OR Notes != "two words" GROUP BY ExecutionStatus`,
		`Urgent = true AND DueAt IS NOT NULL AND CustomerId STARTS_WITH "c-"`,
		`ORDER BY ExecutionStatus`,
		`Amount NOT IN (1, 2) ORDER BY Urgent ASC GROUP BY Status`,
	} {
		f.Add(seed)
	}
	a := &Activity{ActivityID: "a", SearchAttributes: map[string]any{
		"Amount": int64(3), "Ratio": 0.5, "Tags": []string{"a"}, "Notes": "two words", "Urgent": true, "CustomerId": "c-1",
	}}
	b := &Activity{ActivityID: "b", SearchAttributes: map[string]any{"Amount": int64(-9), "Urgent": false}}
	f.Fuzz(func(t *testing.T, text string) {
		q, err := ParseActivitiesWith(text, testCustom)
		if err != nil {
			var qerr *Error
			if !errors.As(err, &qerr) || qerr.Pos < 0 || qerr.Pos > len(text) {
				t.Fatalf("ParseActivitiesWith(%q): %v", text, err)
			}
			return
		}
		canonical := q.String()
		again, err := ParseActivitiesWith(canonical, testCustom)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", canonical, text, err)
		}
		if again.String() != canonical {
			t.Fatalf("canonical form is not stable: %q then %q", canonical, again.String())
		}
		for _, r := range []*Activity{a, b} {
			if q.MatchesActivity(r) != again.MatchesActivity(r) {
				t.Fatalf("%q and its canonical form %q disagree", text, canonical)
			}
		}
		if q.CompareActivities(a, b) != again.CompareActivities(a, b) || q.GroupedByStatus() != again.GroupedByStatus() {
			t.Fatalf("%q and its canonical form %q order or group differently", text, canonical)
		}
	})
}
