package query

import (
	"slices"
	"strings"
	"time"
)

type node interface {
	eval(row) bool
	format(*strings.Builder)
}

type andNode []node

func (n andNode) eval(w row) bool {
	for _, term := range n {
		if !term.eval(w) {
			return false
		}
	}
	return true
}

func (n andNode) format(b *strings.Builder) { formatJoined(b, n, " AND ") }

type orNode []node

func (n orNode) eval(w row) bool {
	for _, term := range n {
		if term.eval(w) {
			return true
		}
	}
	return false
}

func (n orNode) format(b *strings.Builder) { formatJoined(b, n, " OR ") }

func formatJoined(b *strings.Builder, terms []node, sep string) {
	b.WriteByte('(')
	for i, term := range terms {
		if i > 0 {
			b.WriteString(sep)
		}
		term.format(b)
	}
	b.WriteByte(')')
}

type stringCompare struct {
	col   *column
	op    string
	value string
}

func (n *stringCompare) eval(w row) bool {
	if n.col.value != nil && n.col.value(w) == nil {
		return false // an unset custom attribute is NULL
	}
	got := n.col.str(w)
	switch n.op {
	case "=":
		return got == n.value
	case "!=":
		return got != n.value
	case "STARTS_WITH":
		return strings.HasPrefix(got, n.value)
	case "NOT STARTS_WITH":
		return !strings.HasPrefix(got, n.value)
	}
	return false
}

func (n *stringCompare) format(b *strings.Builder) {
	b.WriteString(n.col.name + " " + n.op + " " + quote(n.value))
}

type stringIn struct {
	col    *column
	values []string
	not    bool
}

func (n *stringIn) eval(w row) bool {
	if n.col.value != nil && n.col.value(w) == nil {
		return false // an unset custom attribute is NULL
	}
	return slices.Contains(n.values, n.col.str(w)) != n.not
}

func (n *stringIn) format(b *strings.Builder) {
	quoted := make([]string, len(n.values))
	for i, v := range n.values {
		quoted[i] = quote(v)
	}
	formatIn(b, n.col.name, n.not, quoted)
}

func formatIn(b *strings.Builder, col string, not bool, values []string) {
	b.WriteString(col)
	if not {
		b.WriteString(" NOT")
	}
	b.WriteString(" IN (" + strings.Join(values, ", ") + ")")
}

type statusIn struct {
	sch    *schema
	values []int32
	not    bool
	// list marks a query written with IN, to format it back the same way.
	list bool
}

func (n *statusIn) eval(w row) bool { return slices.Contains(n.values, w.statusValue()) != n.not }

func (n *statusIn) format(b *strings.Builder) {
	if !n.list {
		op := " = "
		if n.not {
			op = " != "
		}
		b.WriteString("Status" + op + quote(n.sch.statusName(n.values[0])))
		return
	}
	quoted := make([]string, len(n.values))
	for i, v := range n.values {
		quoted[i] = quote(n.sch.statusName(v))
	}
	formatIn(b, "Status", n.not, quoted)
}

// Time predicates follow SQL's NULL rules: a worker whose time is unknown matches none of
// them (IS NULL finds it).
type timeCompare struct {
	col   *column
	op    string
	value time.Time
}

func (n *timeCompare) eval(w row) bool {
	got := n.col.time(w)
	if got.IsZero() {
		return false
	}
	return compareHolds(n.op, got.Compare(n.value))
}

func (n *timeCompare) format(b *strings.Builder) {
	b.WriteString(n.col.name + " " + n.op + " " + quote(n.value.Format(time.RFC3339Nano)))
}

type timeBetween struct {
	col      *column
	from, to time.Time
	not      bool
}

func (n *timeBetween) eval(w row) bool {
	got := n.col.time(w)
	if got.IsZero() {
		return false
	}
	in := got.Compare(n.from) >= 0 && got.Compare(n.to) <= 0
	return in != n.not
}

func (n *timeBetween) format(b *strings.Builder) {
	b.WriteString(n.col.name)
	if n.not {
		b.WriteString(" NOT")
	}
	b.WriteString(" BETWEEN " + quote(n.from.Format(time.RFC3339Nano)) + " AND " + quote(n.to.Format(time.RFC3339Nano)))
}

// isNull matches an empty string or an unknown time.
type isNull struct {
	col *column
	not bool
}

func (n *isNull) eval(w row) bool {
	var null bool
	if n.col.value != nil {
		null = customNull(n.col, w)
	} else if n.col.typ == timeColumn {
		null = n.col.time(w).IsZero()
	} else {
		null = n.col.str(w) == ""
	}
	return null != n.not
}

func (n *isNull) format(b *strings.Builder) {
	if n.not {
		b.WriteString(n.col.name + " IS NOT NULL")
		return
	}
	b.WriteString(n.col.name + " IS NULL")
}

// quote double-quotes s so that the lexer reads it back unchanged.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}
