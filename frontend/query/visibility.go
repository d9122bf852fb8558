package query

import (
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/vigilhq/vigil/common/visibility"
)

// Visibility compiles an activity query (ParseActivities, ParseActivitiesWith) into the
// visibility query the store runs against its visibility tables: every clause is kept, with
// the semantics the evaluator gives it (MatchesActivity, CompareActivities), so the store's
// answer is the evaluator's. GROUP BY is not part of it (Count asks for counts by status).
//
// It fails only for what no store can compare: a value holding a NUL character.
func (q *Query) Visibility() (*visibility.Query, error) {
	out := &visibility.Query{}
	if q == nil {
		return out, nil
	}
	if q.sch != nil && !q.sch.activities {
		return nil, fmt.Errorf("a worker query has no visibility form")
	}
	if q.root != nil {
		e, err := visibilityExpr(q.root)
		if err != nil {
			return nil, err
		}
		out.Where = e
	}
	for _, t := range q.orderBy {
		out.OrderBy = append(out.OrderBy, visibility.Order{Field: visibilityField(t.col), Desc: t.desc})
	}
	return out, nil
}

func visibilityField(c *column) visibility.Field {
	if c.attrType != enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED {
		return visibility.Field{Attr: c.name, Type: c.attrType}
	}
	return visibility.Field{Column: c.sys}
}

func visibilityExpr(n node) (*visibility.Expr, error) {
	switch n := n.(type) {
	case andNode:
		return visibilityJoin(visibility.OpAnd, n)
	case orNode:
		return visibilityJoin(visibility.OpOr, n)
	case *stringCompare:
		e := &visibility.Expr{Field: visibilityField(n.col), Values: []visibility.Value{{S: n.value}}}
		switch n.op {
		case "=", "!=":
			e.Op, e.Cmp = visibility.OpCompare, n.op
		case "STARTS_WITH", "NOT STARTS_WITH":
			e.Op, e.Not = visibility.OpPrefix, n.op == "NOT STARTS_WITH"
		}
		return checkStrings(e)
	case *stringIn:
		e := &visibility.Expr{Op: visibility.OpIn, Field: visibilityField(n.col), Not: n.not}
		for _, v := range n.values {
			e.Values = append(e.Values, visibility.Value{S: v})
		}
		return checkStrings(e)
	case *statusIn:
		e := &visibility.Expr{Op: visibility.OpIn, Field: visibility.Field{Column: visibility.ColumnStatus}, Not: n.not}
		for _, v := range n.values {
			e.Values = append(e.Values, visibility.Value{I: int64(v)})
		}
		return e, nil
	case *timeCompare:
		return &visibility.Expr{Op: visibility.OpCompare, Cmp: n.op, Field: visibilityField(n.col),
			Values: []visibility.Value{timeValue(n.col, n.value)}}, nil
	case *timeBetween:
		return &visibility.Expr{Op: visibility.OpBetween, Field: visibilityField(n.col), Not: n.not,
			Values: []visibility.Value{timeValue(n.col, n.from), timeValue(n.col, n.to)}}, nil
	case *isNull:
		return &visibility.Expr{Op: visibility.OpNull, Field: visibilityField(n.col), Not: n.not}, nil
	case *numCompare:
		return &visibility.Expr{Op: visibility.OpCompare, Cmp: n.op, Field: visibilityField(n.col),
			Values: []visibility.Value{numValue(n.col, n.value)}}, nil
	case *numBetween:
		return &visibility.Expr{Op: visibility.OpBetween, Field: visibilityField(n.col), Not: n.not,
			Values: []visibility.Value{numValue(n.col, n.from), numValue(n.col, n.to)}}, nil
	case *numIn:
		e := &visibility.Expr{Op: visibility.OpIn, Field: visibilityField(n.col), Not: n.not}
		for _, v := range n.values {
			e.Values = append(e.Values, numValue(n.col, v))
		}
		return e, nil
	case *boolCompare:
		v := int64(0)
		if n.value {
			v = 1
		}
		cmp := "="
		if n.not {
			cmp = "!="
		}
		return &visibility.Expr{Op: visibility.OpCompare, Cmp: cmp, Field: visibilityField(n.col), Values: []visibility.Value{{I: v}}}, nil
	case *listContains:
		e := &visibility.Expr{Op: visibility.OpContains, Field: visibilityField(n.col), Not: n.not}
		for _, v := range n.values {
			e.Values = append(e.Values, visibility.Value{S: v})
		}
		return checkStrings(e)
	case *textMatch:
		e := &visibility.Expr{Op: visibility.OpWords, Field: visibilityField(n.col), Not: n.not}
		for _, w := range n.words {
			e.Values = append(e.Values, visibility.Value{S: w})
		}
		return checkStrings(e)
	}
	return nil, fmt.Errorf("query clause %T has no visibility form", n)
}

func visibilityJoin(op visibility.Op, terms []node) (*visibility.Expr, error) {
	e := &visibility.Expr{Op: op}
	for _, t := range terms {
		a, err := visibilityExpr(t)
		if err != nil {
			return nil, err
		}
		e.Args = append(e.Args, a)
	}
	return e, nil
}

// timeValue is a time literal as its column is stored: nanoseconds for the system times, the
// fixed-width text of a Datetime attribute.
func timeValue(c *column, tm time.Time) visibility.Value {
	if c.attrType == enumspb.INDEXED_VALUE_TYPE_DATETIME {
		return visibility.Value{S: visibility.DatetimeString(tm)}
	}
	return visibility.Value{I: visibility.BoundNanos(tm)}
}

func numValue(c *column, l numLiteral) visibility.Value {
	if c.typ == doubleColumn {
		return visibility.Value{F: l.f}
	}
	return visibility.Value{I: l.i}
}

// checkStrings refuses a value holding a NUL character: PostgreSQL cannot compare one, and a
// stored value never holds one (visibility.AttributesOf leaves such values out).
func checkStrings(e *visibility.Expr) (*visibility.Expr, error) {
	for _, v := range e.Values {
		if strings.IndexByte(v.S, 0) >= 0 {
			return nil, fmt.Errorf("%s: a value cannot hold a NUL character", e.Field.Attr+string(e.Field.Column))
		}
	}
	return e, nil
}
