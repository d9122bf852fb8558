package visibility

import (
	"encoding/json"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
)

// Query selects and orders records: Where (nil: every record), then OrderBy, ties broken by
// business ID and run ID so that the order is total and keyset pagination exact.
//
// The semantics are SQL's, spelled out so that the frontend's evaluator and every store agree:
// a predicate on a custom attribute the record lacks is false, whatever its operator
// (Not included), and only OpNull holds for it; a predicate on an unknown time or duration is
// false likewise. Negation exists only inside predicates (Not), as in the query language.
type Query struct {
	Where   *Expr   `json:"w,omitempty"`
	OrderBy []Order `json:"o,omitempty"`
}

// Order is one ORDER BY term. Ascending puts unknown values last, descending first.
type Order struct {
	Field Field `json:"f"`
	Desc  bool  `json:"d,omitempty"`
}

// Column is a system column of a Record.
type Column string

// The system columns.
const (
	ColumnBusinessID        Column = "BusinessId"
	ColumnRunID             Column = "RunId"
	ColumnTypeName          Column = "TypeName"
	ColumnTaskQueue         Column = "TaskQueue"
	ColumnWorkerInstanceKey Column = "WorkerInstanceKey"
	ColumnStatus            Column = "Status"
	ColumnStartTime         Column = "StartTime"
	ColumnExecutionTime     Column = "ExecutionTime"
	ColumnCloseTime         Column = "CloseTime"
	ColumnDuration          Column = "ExecutionDuration"
)

// Field names a system column, or a custom attribute by name and the type it is registered
// with: a value stored with another type does not match.
type Field struct {
	Column Column                   `json:"c,omitempty"`
	Attr   string                   `json:"a,omitempty"`
	Type   enumspb.IndexedValueType `json:"t,omitempty"`
}

// Op is an Expr's operator.
type Op string

// The operators. Values are strings for string columns and Keyword attributes, int64 for
// Status, times (unix nanoseconds) and durations, Int and Bool (0, 1), float64 for Double,
// DatetimeString for Datetime attributes.
const (
	OpAnd Op = "and"
	OpOr  Op = "or"
	// OpCompare: Field Cmp Values[0]; Cmp is one of = != < <= > >=.
	OpCompare Op = "cmp"
	// OpIn: Field [NOT] IN Values.
	OpIn Op = "in"
	// OpBetween: Field [NOT] BETWEEN Values[0] AND Values[1] (inclusive).
	OpBetween Op = "between"
	// OpPrefix: Field [NOT] STARTS_WITH Values[0].
	OpPrefix Op = "prefix"
	// OpNull: Field IS [NOT] NULL. A custom attribute is null when the record lacks it, or
	// holds an empty Keyword or Text or an empty KeywordList.
	OpNull Op = "null"
	// OpContains: a KeywordList holds one of Values (Not: holds none of them).
	OpContains Op = "contains"
	// OpWords: a Text holds every word of Values (Not: lacks one of them).
	OpWords Op = "words"
)

// Expr is a node of a Where tree.
type Expr struct {
	Op   Op      `json:"op"`
	Args []*Expr `json:"x,omitempty"`
	// The predicate's parts (every Op but And and Or).
	Field  Field   `json:"f,omitzero"`
	Cmp    string  `json:"c,omitempty"`
	Not    bool    `json:"n,omitempty"`
	Values []Value `json:"v,omitempty"`
}

// Value is a literal; which member holds it follows from the Field (see Op).
type Value struct {
	S string  `json:"s,omitempty"`
	I int64   `json:"i,omitempty"`
	F float64 `json:"f,omitempty"`
}

// Encode returns q as it travels between hosts.
func (q *Query) Encode() []byte {
	b, _ := json.Marshal(q) // plain structs always marshal
	return b
}

// DecodeQuery reads an encoded Query and checks its shape, so that a store compiles only
// well-formed trees.
func DecodeQuery(b []byte) (*Query, error) {
	var q Query
	if err := json.Unmarshal(b, &q); err != nil {
		return nil, fmt.Errorf("visibility query does not decode: %w", err)
	}
	if err := q.Check(); err != nil {
		return nil, err
	}
	return &q, nil
}

// MaxDepth bounds the nesting of a Where tree.
const MaxDepth = 128

// Check reports whether q is well formed: known operators and columns, the number of values
// each operator takes, no ORDER BY on a KeywordList or Text.
func (q *Query) Check() error {
	if q.Where != nil {
		if err := q.Where.check(0); err != nil {
			return err
		}
	}
	for _, o := range q.OrderBy {
		if err := o.Field.check(); err != nil {
			return err
		}
		if o.Field.Attr != "" && (o.Field.Type == enumspb.INDEXED_VALUE_TYPE_TEXT || o.Field.Type == enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST) {
			return fmt.Errorf("visibility query: cannot order by %s (%s)", o.Field.Attr, o.Field.Type)
		}
	}
	return nil
}

func (f Field) check() error {
	if f.Attr != "" {
		if f.Column != "" {
			return fmt.Errorf("visibility query: field names both column %s and attribute %s", f.Column, f.Attr)
		}
		if _, ok := enumspb.IndexedValueType_name[int32(f.Type)]; !ok || f.Type == enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED {
			return fmt.Errorf("visibility query: attribute %s has no valid type", f.Attr)
		}
		return nil
	}
	switch f.Column {
	case ColumnBusinessID, ColumnRunID, ColumnTypeName, ColumnTaskQueue, ColumnWorkerInstanceKey,
		ColumnStatus, ColumnStartTime, ColumnExecutionTime, ColumnCloseTime, ColumnDuration:
		return nil
	}
	return fmt.Errorf("visibility query: unknown column %q", f.Column)
}

func (e *Expr) check(depth int) error {
	if e == nil {
		return fmt.Errorf("visibility query: empty expression")
	}
	if depth > MaxDepth {
		return fmt.Errorf("visibility query: nested deeper than %d", MaxDepth)
	}
	want := -1 // number of values; -1 any but zero
	switch e.Op {
	case OpAnd, OpOr:
		if len(e.Args) == 0 {
			return fmt.Errorf("visibility query: %s without operands", e.Op)
		}
		for _, a := range e.Args {
			if err := a.check(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case OpCompare:
		switch e.Cmp {
		case "=", "!=", "<", "<=", ">", ">=":
		default:
			return fmt.Errorf("visibility query: unknown comparison %q", e.Cmp)
		}
		want = 1
	case OpPrefix:
		want = 1
	case OpBetween:
		want = 2
	case OpNull:
		want = 0
	case OpIn, OpContains, OpWords:
	default:
		return fmt.Errorf("visibility query: unknown operator %q", e.Op)
	}
	if err := e.Field.check(); err != nil {
		return err
	}
	list := e.Field.Attr != "" && e.Field.Type == enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST
	text := e.Field.Attr != "" && e.Field.Type == enumspb.INDEXED_VALUE_TYPE_TEXT
	// A KeywordList takes only OpContains and OpNull, a Text only OpWords and OpNull, and
	// those operators take nothing else.
	if (e.Op == OpContains) != list && !(list && e.Op == OpNull) || (e.Op == OpWords) != text && !(text && e.Op == OpNull) {
		return fmt.Errorf("visibility query: operator %s does not apply to %s", e.Op, e.Field.name())
	}
	if (want >= 0 && len(e.Values) != want) || (want < 0 && len(e.Values) == 0 && e.Op != OpWords) {
		return fmt.Errorf("visibility query: %s on %s takes %d values, not %d", e.Op, e.Field.name(), want, len(e.Values))
	}
	return nil
}

func (f Field) name() string {
	if f.Attr != "" {
		return f.Attr
	}
	return string(f.Column)
}
