package query

import (
	"cmp"
	"strings"
)

// ORDER BY and GROUP BY, for activity queries. ListActivityExecutions sorts by the ORDER BY
// columns (then by activity ID and run ID, so that the order is total); CountActivityExecutions
// counts by the GROUP BY column. Temporal's visibility allows GROUP BY ExecutionStatus only,
// and so does vigil.

type orderTerm struct {
	col  *column
	desc bool
}

// atClause reports whether the next token starts ORDER BY or GROUP BY.
func (p *parser) atClause() bool {
	t := p.peek()
	return t.keyword("ORDER") || t.keyword("GROUP")
}

func (p *parser) parseClauses(q *Query) error {
	for p.atClause() {
		kw := p.next()
		if by := p.next(); !by.keyword("BY") {
			return errorAt(by.pos, "expected BY after %s, found %s", strings.ToUpper(kw.text), by.describe())
		}
		if !p.sch.activities {
			return errorAt(kw.pos, "%s BY is not supported in this query", strings.ToUpper(kw.text))
		}
		if kw.keyword("GROUP") {
			if q.groupBy != nil {
				return errorAt(kw.pos, "GROUP BY is given twice")
			}
			t := p.next()
			col, ok := p.sch.lookupColumn(t.text)
			if t.kind != tokIdent || !ok || col.typ != statusColumn {
				return errorAt(t.pos, "GROUP BY is only supported for ExecutionStatus, found %s", t.describe())
			}
			q.groupBy = col
			continue
		}
		if q.orderBy != nil {
			return errorAt(kw.pos, "ORDER BY is given twice")
		}
		for {
			t := p.next()
			col, ok := p.sch.lookupColumn(t.text)
			if t.kind != tokIdent || !ok {
				return errorAt(t.pos, "expected a column to ORDER BY (known columns: %s), found %s", strings.Join(p.sch.names(), ", "), t.describe())
			}
			if col.typ == textColumn || col.typ == keywordListColumn {
				return errorAt(t.pos, "cannot ORDER BY %s: Text and KeywordList attributes have no order", col.name)
			}
			term := orderTerm{col: col}
			if dir := p.peek(); dir.keyword("ASC") || dir.keyword("DESC") {
				p.next()
				term.desc = dir.keyword("DESC")
			}
			q.orderBy = append(q.orderBy, term)
			if p.peek().kind != tokComma {
				break
			}
			p.next()
		}
	}
	return nil
}

func (q *Query) formatClauses(b *strings.Builder) {
	if len(q.orderBy) > 0 {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("ORDER BY ")
		for i, term := range q.orderBy {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(term.col.name)
			if term.desc {
				b.WriteString(" DESC")
			}
		}
	}
	if q.groupBy != nil {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("GROUP BY " + q.groupBy.name)
	}
}

// Ordered reports whether the query has an ORDER BY clause.
func (q *Query) Ordered() bool { return q != nil && len(q.orderBy) > 0 }

// GroupedByStatus reports whether the query has GROUP BY ExecutionStatus.
func (q *Query) GroupedByStatus() bool { return q != nil && q.groupBy != nil }

// CompareActivities orders two activities by the ORDER BY clause, as the stores order a
// visibility query: ascending values first, a missing value (NULL) last, as PostgreSQL orders
// them (first for DESC); ties are broken by activity ID, then run ID, in the direction of the
// last term (so that ORDER BY StartTime DESC is one backward walk of an index).
func (q *Query) CompareActivities(a, b *Activity) int {
	desc := false
	for _, term := range q.orderBy {
		desc = term.desc
		c := compareColumn(term.col, a, b)
		if term.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	c := cmp.Compare(a.ActivityID, b.ActivityID)
	if c == 0 {
		c = cmp.Compare(a.RunID, b.RunID)
	}
	if desc {
		return -c
	}
	return c
}

// compareColumn orders by one column, NULL last.
func compareColumn(col *column, a, b row) int {
	if col.value != nil {
		va, vb := col.value(a), col.value(b)
		switch {
		case va == nil && vb == nil:
			return 0
		case va == nil:
			return 1
		case vb == nil:
			return -1
		}
	}
	switch col.typ {
	case statusColumn:
		return cmp.Compare(a.statusValue(), b.statusValue())
	case stringColumn:
		return cmp.Compare(col.str(a), col.str(b))
	case timeColumn:
		ta, tb := col.time(a), col.time(b)
		switch {
		case ta.IsZero() && tb.IsZero():
			return 0
		case ta.IsZero():
			return 1
		case tb.IsZero():
			return -1
		}
		return ta.Compare(tb)
	case intColumn, doubleColumn, durationColumn:
		ia, fa, _ := number(col.value(a))
		ib, fb, _ := number(col.value(b))
		if col.typ != doubleColumn {
			return cmp.Compare(ia, ib)
		}
		return cmp.Compare(fa, fb)
	case boolColumn:
		ba, _ := col.value(a).(bool)
		bb, _ := col.value(b).(bool)
		switch {
		case ba == bb:
			return 0
		case !ba:
			return -1
		}
		return 1
	}
	return 0
}
