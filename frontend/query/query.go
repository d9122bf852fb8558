// Package query parses and evaluates the filter language of ListWorkers and CountWorkers.
//
// It accepts the subset of Temporal's visibility syntax that `temporal worker list --query`
// users write, for example
//
//	TaskQueue = "orders" AND (Status = "Running" OR HeartbeatTime > "2025-01-01T00:00:00Z")
//
// Columns are case-insensitive; values are quoted strings (single or double quotes). A query is
// checked whole when it is parsed (columns, operators, value types), so evaluating it against a
// worker cannot fail.
package query

import (
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
)

// MaxLength bounds the length of a query in bytes.
const MaxLength = 16 * 1024

// MaxDepth bounds the nesting of parentheses and operators, so that a hostile query cannot
// exhaust the stack.
const MaxDepth = 64

// Worker is what a query is evaluated against: the reported heartbeat with the server-derived
// status.
type Worker struct {
	WorkerInstanceKey string
	WorkerIdentity    string
	HostName          string
	TaskQueue         string
	DeploymentName    string
	BuildID           string
	SdkName           string
	SdkVersion        string
	// Status is the status the server shows for the worker (not necessarily what it reported).
	Status enumspb.WorkerStatus
	// Zero when unknown.
	StartTime     time.Time
	HeartbeatTime time.Time
}

// Activity is what an activity query (ParseActivities) is evaluated against.
type Activity struct {
	ActivityID   string
	RunID        string
	ActivityType string
	TaskQueue    string
	// WorkerInstanceKey is the worker running the current attempt; empty while none does.
	WorkerInstanceKey string
	Status            enumspb.ActivityExecutionStatus
	// Zero when unknown (CloseTime: while running). ExecutionTime is StartTime plus the start
	// delay.
	StartTime     time.Time
	ExecutionTime time.Time
	CloseTime     time.Time
	// SearchAttributes are the custom search attributes' values, decoded: string (Keyword,
	// Text), []string (KeywordList), int64 (Int), float64 (Double), bool (Bool) or time.Time
	// (Datetime).
	SearchAttributes map[string]any
}

// Error is a query that cannot be parsed or does not type-check. Pos is the byte offset of the
// offending token.
type Error struct {
	Pos int
	Msg string
}

func (e *Error) Error() string {
	return fmt.Sprintf("invalid query at position %d: %s", e.Pos+1, e.Msg)
}

func errorAt(pos int, format string, args ...any) *Error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// Query is a parsed query. The zero query (from an empty string) matches every worker.
type Query struct {
	root node
	sch  *schema
	// Clauses of an activity query (clauses.go).
	orderBy []orderTerm
	groupBy *column
}

// Parse parses a worker query (ListWorkers). An empty (or all-blank) text matches everything.
func Parse(text string) (*Query, error) { return parse(text, workerSchema) }

// ParseActivities parses an activity query (ListActivityExecutions): columns ActivityId,
// RunId, ActivityType, TaskQueue, WorkerInstanceKey, ExecutionStatus (alias Status),
// StartTime and CloseTime, in the same syntax.
func ParseActivities(text string) (*Query, error) { return parse(text, activitySchema) }

func parse(text string, sch *schema) (*Query, error) {
	if len(text) > MaxLength {
		return nil, errorAt(MaxLength, "query is longer than %d bytes", MaxLength)
	}
	tokens, err := lex(text)
	if err != nil {
		return nil, err
	}
	p := &parser{sch: sch, tokens: tokens}
	if p.peek().kind == tokEOF {
		return &Query{}, nil
	}
	var root node
	if !p.atClause() {
		if root, err = p.parseOr(0); err != nil {
			return nil, err
		}
	}
	q := &Query{root: root, sch: sch}
	if err := p.parseClauses(q); err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		if t.kind == tokRParen {
			return nil, errorAt(t.pos, "unbalanced ')'")
		}
		return nil, errorAt(t.pos, "expected AND, OR or end of query, found %s", t.describe())
	}
	return q, nil
}

// Matches reports whether w satisfies the query (from Parse).
func (q *Query) Matches(w *Worker) bool {
	if q == nil || q.root == nil {
		return true
	}
	return !q.sch.activities && q.root.eval(w)
}

// MatchesActivity reports whether a satisfies the query (from ParseActivities).
func (q *Query) MatchesActivity(a *Activity) bool {
	if q == nil || q.root == nil {
		return true
	}
	return q.sch.activities && q.root.eval(a)
}

// String returns the query in canonical form: every column in its documented spelling, every
// value double-quoted, every binary operation parenthesised. Parsing it yields the same query.
func (q *Query) String() string {
	if q == nil {
		return ""
	}
	var b strings.Builder
	if q.root != nil {
		q.root.format(&b)
	}
	q.formatClauses(&b)
	return b.String()
}
