package query

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/vigilhq/vigil/common/visibility"
)

// Custom search attributes: an activity query may name the namespace's registered attributes
// (ParseActivitiesWith) besides the system columns, with the operators their types allow:
//
//	Keyword      =  !=  IN  STARTS_WITH  IS NULL                 (as the system string columns)
//	Text         =  !=  IS NULL    ("=" matches when every word of the value is a word of the text)
//	KeywordList  =  !=  IN  IS NULL  ("=" matches when the list holds the value, IN when it holds one)
//	Int, Double  =  !=  <  <=  >  >=  IN  BETWEEN  IS NULL (values are numbers, quoted or not)
//	Bool         =  !=  IS NULL    (true or false, quoted or not)
//	Datetime     as StartTime and CloseTime
//
// A row without a value for the attribute matches only IS NULL, as in SQL.

// ParseActivitiesWith parses an activity query that may also name the custom search
// attributes in custom (name → type). Names are matched case-insensitively, as column names
// are.
func ParseActivitiesWith(text string, custom map[string]enumspb.IndexedValueType) (*Query, error) {
	if len(custom) == 0 {
		return parse(text, activitySchema)
	}
	cols := make([]column, 0, len(custom))
	for _, name := range slices.Sorted(maps.Keys(custom)) {
		if _, clash := activitySchema.lookupColumn(name); clash {
			continue // registration refuses system names; an older record must not shadow one
		}
		cols = append(cols, customColumn(name, custom[name]))
	}
	return parse(text, newActivitySchema(cols))
}

func customColumn(name string, t enumspb.IndexedValueType) column {
	value := func(r row) any {
		a, ok := r.(*Activity)
		if !ok {
			return nil
		}
		return a.SearchAttributes[name]
	}
	c := column{name: name, value: value, attrType: t}
	switch t {
	case enumspb.INDEXED_VALUE_TYPE_KEYWORD:
		c.typ = stringColumn
		c.str = func(r row) string { s, _ := value(r).(string); return s }
	case enumspb.INDEXED_VALUE_TYPE_DATETIME:
		c.typ = timeColumn
		c.time = func(r row) time.Time { tm, _ := value(r).(time.Time); return tm }
	case enumspb.INDEXED_VALUE_TYPE_INT:
		c.typ = intColumn
	case enumspb.INDEXED_VALUE_TYPE_DOUBLE:
		c.typ = doubleColumn
	case enumspb.INDEXED_VALUE_TYPE_BOOL:
		c.typ = boolColumn
	case enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST:
		c.typ = keywordListColumn
	default:
		c.typ = textColumn
	}
	return c
}

func isNumeric(t columnType) bool { return t == intColumn || t == doubleColumn || t == durationColumn }

// number reads a numeric value of a row as a float64 (Int values beyond 2^53 lose precision
// only when compared with a Double literal, never with an Int one: see numCompare).
func number(v any) (i int64, f float64, ok bool) {
	switch n := v.(type) {
	case int64:
		return n, float64(n), true
	case float64:
		return int64(n), n, true
	}
	return 0, 0, false
}

// numValue reads a number literal (quoted or not) for col.
func (p *parser) numValue(col *column) (numLiteral, error) {
	t := p.next()
	if t.kind != tokNumber && t.kind != tokString {
		return numLiteral{}, errorAt(t.pos, "expected a number for %s, found %s", col.name, t.describe())
	}
	if col.typ == durationColumn {
		if i, err := strconv.ParseInt(t.text, 10, 64); err == nil {
			return numLiteral{i: i, f: float64(i), isInt: true}, nil
		}
		d, err := time.ParseDuration(t.text)
		if err != nil {
			return numLiteral{}, errorAt(t.pos, "%s value %q is not a duration (e.g. \"90s\", \"1h30m\") or a number of nanoseconds", col.name, t.text)
		}
		return numLiteral{i: int64(d), f: float64(d), isInt: true}, nil
	}
	if col.typ == intColumn {
		i, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			return numLiteral{}, errorAt(t.pos, "%s is an Int search attribute: %q is not an integer", col.name, t.text)
		}
		return numLiteral{i: i, f: float64(i), isInt: true}, nil
	}
	f, err := strconv.ParseFloat(t.text, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return numLiteral{}, errorAt(t.pos, "%s is a Double search attribute: %q is not a number", col.name, t.text)
	}
	return numLiteral{f: f}, nil
}

type numLiteral struct {
	i     int64
	f     float64
	isInt bool
}

func (l numLiteral) compare(v any) (int, bool) {
	i, f, ok := number(v)
	if !ok {
		return 0, false
	}
	if _, isInt := v.(int64); isInt && l.isInt {
		return cmp.Compare(i, l.i), true
	}
	return cmp.Compare(f, l.f), true
}

func (l numLiteral) String() string {
	if l.isInt {
		return strconv.FormatInt(l.i, 10)
	}
	return strconv.FormatFloat(l.f, 'g', -1, 64)
}

func (p *parser) boolValue(col *column) (bool, error) {
	t := p.next()
	if t.kind == tokIdent || t.kind == tokString {
		switch strings.ToLower(t.text) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
	}
	return false, errorAt(t.pos, "expected true or false for %s, found %s", col.name, t.describe())
}

// parseCustomComparison parses "col op value" for the custom-only column types.
func (p *parser) parseCustomComparison(col *column, opTok token) (node, error) {
	op := opTok.text
	switch col.typ {
	case intColumn, doubleColumn, durationColumn:
		v, err := p.numValue(col)
		if err != nil {
			return nil, err
		}
		return &numCompare{col: col, op: op, value: v}, nil
	case boolColumn:
		if op != "=" && op != "!=" {
			return nil, errorAt(opTok.pos, "operator %s is not supported for %s (use = or !=)", op, col.name)
		}
		v, err := p.boolValue(col)
		if err != nil {
			return nil, err
		}
		return &boolCompare{col: col, not: op == "!=", value: v}, nil
	case keywordListColumn:
		if op != "=" && op != "!=" {
			return nil, errorAt(opTok.pos, "operator %s is not supported for %s (use =, != or IN)", op, col.name)
		}
		v, err := p.stringValue(col)
		if err != nil {
			return nil, err
		}
		return &listContains{col: col, values: []string{v}, not: op == "!="}, nil
	default: // textColumn
		if op != "=" && op != "!=" {
			return nil, errorAt(opTok.pos, "operator %s is not supported for %s (use = or !=)", op, col.name)
		}
		v, err := p.stringValue(col)
		if err != nil {
			return nil, err
		}
		return &textMatch{col: col, value: v, words: words(v), not: op == "!="}, nil
	}
}

type numCompare struct {
	col   *column
	op    string
	value numLiteral
}

func (n *numCompare) eval(r row) bool {
	c, ok := n.value.compare(n.col.value(r))
	if !ok {
		return false
	}
	return compareHolds(n.op, c)
}

// compareHolds reports whether a comparison whose operands compared as c (-1, 0, 1) holds.
func compareHolds(op string, c int) bool {
	switch op {
	case "=":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case ">":
		return c > 0
	case "<=":
		return c <= 0
	case ">=":
		return c >= 0
	}
	return false
}

func (n *numCompare) format(b *strings.Builder) {
	b.WriteString(n.col.name + " " + n.op + " " + n.value.String())
}

type numBetween struct {
	col      *column
	from, to numLiteral
	not      bool
}

func (n *numBetween) eval(r row) bool {
	lo, ok := n.from.compare(n.col.value(r))
	if !ok {
		return false
	}
	hi, _ := n.to.compare(n.col.value(r))
	return (lo >= 0 && hi <= 0) != n.not
}

func (n *numBetween) format(b *strings.Builder) {
	b.WriteString(n.col.name)
	if n.not {
		b.WriteString(" NOT")
	}
	b.WriteString(" BETWEEN " + n.from.String() + " AND " + n.to.String())
}

type numIn struct {
	col    *column
	values []numLiteral
	not    bool
}

func (n *numIn) eval(r row) bool {
	v := n.col.value(r)
	if v == nil {
		return false
	}
	found := slices.ContainsFunc(n.values, func(l numLiteral) bool { c, ok := l.compare(v); return ok && c == 0 })
	return found != n.not
}

func (n *numIn) format(b *strings.Builder) {
	values := make([]string, len(n.values))
	for i, v := range n.values {
		values[i] = v.String()
	}
	formatIn(b, n.col.name, n.not, values)
}

type boolCompare struct {
	col   *column
	value bool
	not   bool
}

func (n *boolCompare) eval(r row) bool {
	v, ok := n.col.value(r).(bool)
	return ok && (v == n.value) != n.not
}

func (n *boolCompare) format(b *strings.Builder) {
	op := " = "
	if n.not {
		op = " != "
	}
	b.WriteString(n.col.name + op + strconv.FormatBool(n.value))
}

// listContains matches a KeywordList that holds one of values (= and IN), or none (!= and
// NOT IN).
type listContains struct {
	col    *column
	values []string
	not    bool
	// list marks a query written with IN.
	list bool
}

func (n *listContains) eval(r row) bool {
	l, ok := n.col.value(r).([]string)
	if !ok {
		return false
	}
	found := slices.ContainsFunc(n.values, func(v string) bool { return slices.Contains(l, v) })
	return found != n.not
}

func (n *listContains) format(b *strings.Builder) {
	if !n.list {
		op := " = "
		if n.not {
			op = " != "
		}
		b.WriteString(n.col.name + op + quote(n.values[0]))
		return
	}
	quoted := make([]string, len(n.values))
	for i, v := range n.values {
		quoted[i] = quote(v)
	}
	formatIn(b, n.col.name, n.not, quoted)
}

// textMatch matches a Text value that holds every word of the query's value, in any case.
type textMatch struct {
	col   *column
	value string
	words []string
	not   bool
}

func (n *textMatch) eval(r row) bool {
	s, ok := n.col.value(r).(string)
	if !ok {
		return false
	}
	have := words(s)
	all := true
	for _, w := range n.words {
		if !slices.Contains(have, w) {
			all = false
			break
		}
	}
	return all != n.not
}

func (n *textMatch) format(b *strings.Builder) {
	op := " = "
	if n.not {
		op = " != "
	}
	b.WriteString(n.col.name + op + quote(n.value))
}

// words splits text into the lower-case words a Text attribute is matched by, as the stores
// index them.
func words(text string) []string { return visibility.Words(text) }

// customNull reports whether a custom column has no value in r.
func customNull(c *column, r row) bool {
	switch v := c.value(r).(type) {
	case nil:
		return true
	case string:
		return v == ""
	case []string:
		return len(v) == 0
	}
	return false
}
