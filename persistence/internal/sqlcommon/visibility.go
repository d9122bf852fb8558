package sqlcommon

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/vigilhq/vigil/common/visibility"
	"github.com/vigilhq/vigil/persistence"
)

// The visibility tables (schema 0005 in SQLite, 0006 in PostgreSQL), shared by both backends:
//
//	visibility             one row per execution that has a visibility record: the system
//	                       columns, each indexed after (namespace, archetype) and before the
//	                       execution's key, so an equality or a range on one column, or an
//	                       ORDER BY of it, is an index walk that keyset pagination continues.
//	visibility_attributes  one row per custom search attribute (ord 0) holding its value in
//	                       the column of its type, and one row per KeywordList element or Text
//	                       word (ord 1, 2, ...), indexed by (namespace, archetype, name, type,
//	                       value): a filter on an attribute is an index range whose keys select
//	                       the executions.
//
// Queries are compiled here with "?" placeholders and every user value bound as an argument;
// PostgreSQL's backend renumbers them (Dollar).

// Stmt is one SQL statement with its arguments.
type Stmt struct {
	SQL  string
	Args []any
}

// Dollar rewrites the "?" placeholders of SQL compiled here as PostgreSQL's $1, $2, ... The
// compiled text never holds a literal question mark: values are always arguments.
func Dollar(sql string) string {
	var b strings.Builder
	b.Grow(len(sql) + 16)
	n := 0
	for i := 0; i < len(sql); i++ {
		if sql[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(sql[i])
	}
	return b.String()
}

const (
	qUpsertVisibility = `INSERT INTO visibility (namespace_id, archetype_id, business_id, run_id,
		type_name, task_queue, worker_instance_key, status, start_time, execution_time, close_time,
		execution_duration)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (namespace_id, archetype_id, business_id, run_id) DO UPDATE SET
		type_name = excluded.type_name, task_queue = excluded.task_queue,
		worker_instance_key = excluded.worker_instance_key, status = excluded.status,
		start_time = excluded.start_time, execution_time = excluded.execution_time,
		close_time = excluded.close_time,
		execution_duration = excluded.execution_duration`
	qDeleteVisibility = `DELETE FROM visibility
		WHERE namespace_id = ? AND archetype_id = ? AND business_id = ? AND run_id = ?`
	qDeleteVisibilityAttributes = `DELETE FROM visibility_attributes
		WHERE namespace_id = ? AND archetype_id = ? AND business_id = ? AND run_id = ?`
	attributeColumns = `(namespace_id, archetype_id, business_id, run_id, name, ord, value_type, str_value, int_value, dbl_value)`
	// attributeChunk rows of 10 values go in one INSERT: far below either backend's limit of
	// bound parameters.
	attributeChunk = 64
)

// VisibilityFixedSQL are the visibility statements whose text never varies, for a backend to
// prepare once.
var VisibilityFixedSQL = []string{qUpsertVisibility, qDeleteVisibility, qDeleteVisibilityAttributes}

// VisibilityWriteStmts are the statements that store w's visibility record (w.Visibility
// non-nil): the row, and unless w.KeepVisibilityAttributes, the attribute rows replaced.
func VisibilityWriteStmts(w *persistence.ExecutionWrite) []Stmt {
	k, r := w.Key, w.Visibility
	stmts := []Stmt{{SQL: qUpsertVisibility, Args: []any{k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID,
		r.TypeName, r.TaskQueue, r.WorkerInstanceKey, r.Status,
		visibility.TimeNanos(r.StartTime), visibility.TimeNanos(r.ExecutionTime), visibility.TimeNanos(r.CloseTime),
		r.DurationNanos()}}}
	if w.KeepVisibilityAttributes {
		return stmts
	}
	if w.Mode != persistence.WriteModeCreate {
		stmts = append(stmts, Stmt{SQL: qDeleteVisibilityAttributes, Args: keyArgs(k)})
	}
	var rows [][]any
	for _, a := range r.Attributes {
		head := []any{k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, a.Name, 0, int32(a.Type), nil, nil, nil}
		switch a.Type {
		case enumspb.INDEXED_VALUE_TYPE_KEYWORD, enumspb.INDEXED_VALUE_TYPE_TEXT, enumspb.INDEXED_VALUE_TYPE_DATETIME:
			head[7] = a.Str
		case enumspb.INDEXED_VALUE_TYPE_INT, enumspb.INDEXED_VALUE_TYPE_BOOL:
			head[8] = a.Int
		case enumspb.INDEXED_VALUE_TYPE_DOUBLE:
			head[9] = a.Double
		}
		rows = append(rows, head)
		for i, e := range a.List {
			rows = append(rows, []any{k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, a.Name, i + 1, int32(a.Type), e, nil, nil})
		}
	}
	for len(rows) > 0 {
		n := min(len(rows), attributeChunk)
		args := make([]any, 0, 10*n)
		for _, row := range rows[:n] {
			args = append(args, row...)
		}
		stmts = append(stmts, Stmt{SQL: `INSERT INTO visibility_attributes ` + attributeColumns + ` VALUES ` +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?), ", n), ", "), Args: args})
		rows = rows[n:]
	}
	return stmts
}

// VisibilityDeleteStmts remove an execution's visibility rows (with the execution, or when
// its record goes).
func VisibilityDeleteStmts(k persistence.ExecutionKey) []Stmt {
	return []Stmt{{SQL: qDeleteVisibility, Args: keyArgs(k)}, {SQL: qDeleteVisibilityAttributes, Args: keyArgs(k)}}
}

func keyArgs(k persistence.ExecutionKey) []any {
	return []any{k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID}
}

// VisibilityStorable reports whether the record's strings fit the backend's text columns.
func VisibilityStorable(r *visibility.Record, storable func(ss ...string) bool) bool {
	if !storable(r.TypeName, r.TaskQueue, r.WorkerInstanceKey) {
		return false
	}
	for _, a := range r.Attributes {
		if !storable(a.Name, a.Str) || !storable(a.List...) {
			return false
		}
	}
	return true
}

// systemColumn maps a visibility column to its SQL column of the visibility table (alias v).
var systemColumn = map[visibility.Column]string{
	visibility.ColumnBusinessID:        "v.business_id",
	visibility.ColumnRunID:             "v.run_id",
	visibility.ColumnTypeName:          "v.type_name",
	visibility.ColumnTaskQueue:         "v.task_queue",
	visibility.ColumnWorkerInstanceKey: "v.worker_instance_key",
	visibility.ColumnStatus:            "v.status",
	visibility.ColumnStartTime:         "v.start_time",
	visibility.ColumnExecutionTime:     "v.execution_time",
	visibility.ColumnCloseTime:         "v.close_time",
	visibility.ColumnDuration:          "v.execution_duration",
}

// nullableColumn reports whether a system column keeps visibility.Unknown for NULL.
func nullableColumn(c visibility.Column) bool {
	return c == visibility.ColumnStartTime || c == visibility.ColumnExecutionTime || c == visibility.ColumnCloseTime ||
		c == visibility.ColumnDuration
}

func isStringColumn(c visibility.Column) bool {
	switch c {
	case visibility.ColumnBusinessID, visibility.ColumnRunID, visibility.ColumnTypeName,
		visibility.ColumnTaskQueue, visibility.ColumnWorkerInstanceKey:
		return true
	}
	return false
}

// valueKind is the kind of a compared value: 's' string, 'i' int64, 'f' float64.
func valueKind(f visibility.Field) byte {
	if f.Attr == "" {
		if isStringColumn(f.Column) {
			return 's'
		}
		return 'i'
	}
	switch f.Type {
	case enumspb.INDEXED_VALUE_TYPE_INT, enumspb.INDEXED_VALUE_TYPE_BOOL:
		return 'i'
	case enumspb.INDEXED_VALUE_TYPE_DOUBLE:
		return 'f'
	}
	return 's'
}

func valueArg(kind byte, v visibility.Value) any {
	switch kind {
	case 'i':
		return v.I
	case 'f':
		return v.F
	}
	return v.S
}

// attrValueColumn is the column of visibility_attributes that holds a type's values.
func attrValueColumn(t enumspb.IndexedValueType) string {
	switch valueKind(visibility.Field{Attr: "_", Type: t}) {
	case 'i':
		return "int_value"
	case 'f':
		return "dbl_value"
	}
	return "str_value"
}

// compiler builds a WHERE clause with "?" placeholders.
type compiler struct {
	b    strings.Builder
	args []any
	// namespaceID and archetypeID scope the attribute subqueries.
	namespaceID string
	archetypeID uint32
	// sets are the attribute predicates written as sets of executions (IN), for they select
	// few; the others are written as probes of each execution's rows (EXISTS). cur is the
	// predicate being written.
	sets map[*visibility.Expr]bool
	cur  *visibility.Expr
}

// correlated reports whether the predicate being written is a probe.
func (c *compiler) correlated() bool { return !c.sets[c.cur] }

func (c *compiler) arg(v any) {
	c.b.WriteByte('?')
	c.args = append(c.args, v)
}

func (c *compiler) expr(e *visibility.Expr) {
	switch e.Op {
	case visibility.OpAnd, visibility.OpOr:
		sep := " AND "
		if e.Op == visibility.OpOr {
			sep = " OR "
		}
		c.b.WriteByte('(')
		for i, a := range e.Args {
			if i > 0 {
				c.b.WriteString(sep)
			}
			c.expr(a)
		}
		c.b.WriteByte(')')
		return
	}
	if e.Field.Attr != "" {
		c.attrPredicate(e)
		return
	}
	col := systemColumn[e.Field.Column]
	c.b.WriteByte('(')
	if nullableColumn(e.Field.Column) {
		if e.Op == visibility.OpNull {
			c.b.WriteString(col)
			if e.Not {
				c.b.WriteString(" <> ")
			} else {
				c.b.WriteString(" = ")
			}
			c.arg(int64(visibility.Unknown))
			c.b.WriteByte(')')
			return
		}
		c.b.WriteString(col + " <> ")
		c.arg(int64(visibility.Unknown))
		c.b.WriteString(" AND ")
	}
	if e.Op == visibility.OpNull {
		// A system string is never NULL; empty counts as NULL, as the evaluator has it.
		if e.Not {
			c.b.WriteString(col + " <> ''")
		} else {
			c.b.WriteString(col + " = ''")
		}
	} else {
		c.valuePredicate(col, valueKind(e.Field), e)
	}
	c.b.WriteByte(')')
}

// valuePredicate writes a comparison, IN, BETWEEN or prefix test of col.
func (c *compiler) valuePredicate(col string, kind byte, e *visibility.Expr) {
	if e.Not {
		c.b.WriteString("NOT ")
	}
	c.b.WriteByte('(')
	switch e.Op {
	case visibility.OpCompare:
		op := e.Cmp
		if op == "!=" {
			op = "<>"
		}
		c.b.WriteString(col + " " + op + " ")
		c.arg(valueArg(kind, e.Values[0]))
	case visibility.OpIn:
		c.b.WriteString(col + " IN (")
		for i, v := range e.Values {
			if i > 0 {
				c.b.WriteString(", ")
			}
			c.arg(valueArg(kind, v))
		}
		c.b.WriteByte(')')
	case visibility.OpBetween:
		c.b.WriteString(col + " BETWEEN ")
		c.arg(valueArg(kind, e.Values[0]))
		c.b.WriteString(" AND ")
		c.arg(valueArg(kind, e.Values[1]))
	case visibility.OpPrefix:
		prefix := e.Values[0].S
		c.b.WriteString(col + " >= ")
		c.arg(prefix)
		if upper, ok := prefixUpperBound(prefix); ok {
			c.b.WriteString(" AND " + col + " < ")
			c.arg(upper)
		}
	}
	c.b.WriteByte(')')
}

// prefixUpperBound is the least string greater than every string that starts with prefix, in
// byte order (which is code point order in UTF-8): the prefix with its last code point
// incremented. false when there is none (an empty prefix, or only U+10FFFF).
func prefixUpperBound(prefix string) (string, bool) {
	for prefix != "" {
		r, size := utf8.DecodeLastRuneInString(prefix)
		prefix = prefix[:len(prefix)-size]
		switch {
		case r == utf8.RuneError && size <= 1:
			continue // not produced by the lexer; drop it rather than compare wrongly
		case r == utf8.MaxRune:
			continue
		case r == 0xD7FF:
			r = 0xE000 // skip the surrogates, which UTF-8 cannot hold
		default:
			r++
		}
		return prefix + string(r), true
	}
	return "", false
}

// attrIn writes a test of the execution's key against a subquery of the executions whose attribute rows satisfy cond.
func (c *compiler) attrIn(f visibility.Field, not bool, cond func()) {
	if c.correlated() {
		// A probe of the execution's own attribute rows (their primary key), for a plan that
		// walks an order's index and tests each row it meets.
		if not {
			c.b.WriteString("NOT ")
		}
		c.b.WriteString("EXISTS (SELECT 1 FROM visibility_attributes a WHERE a.namespace_id = v.namespace_id" +
			" AND a.archetype_id = v.archetype_id AND a.business_id = v.business_id AND a.run_id = v.run_id AND a.name = ")
	} else {
		// The set of executions whose rows match: an index range of visibility_attributes, from
		// which a plan can find the executions.
		c.b.WriteString("(v.business_id, v.run_id) ")
		if not {
			c.b.WriteString("NOT ")
		}
		c.b.WriteString("IN (SELECT a.business_id, a.run_id FROM visibility_attributes a WHERE a.namespace_id = ")
		c.arg(c.namespaceID)
		c.b.WriteString(" AND a.archetype_id = ")
		c.arg(int64(c.archetypeID))
		c.b.WriteString(" AND a.name = ")
	}
	c.arg(f.Attr)
	c.b.WriteString(" AND a.value_type = ")
	c.arg(int64(f.Type))
	c.b.WriteString(" AND ")
	cond()
	c.b.WriteByte(')')
}

// valueColumn is how a probe compares an attribute's value column: as an expression no index
// provides (the value unchanged), so that the probe looks the execution's own rows up by their
// primary key instead of ranging over the value's index for every row it tests.
func (c *compiler) valueColumn(col string, kind byte) string {
	if !c.correlated() {
		return col
	}
	switch kind {
	case 'i':
		return "(" + col + " + 0)"
	case 'f':
		return "(" + col + " + 0.0)"
	}
	return "(" + col + " || '')"
}

// attrPredicate writes a predicate on a custom attribute: a test of the executions whose
// attribute rows match, so that one without the attribute never matches (but for IS NULL).
func (c *compiler) attrPredicate(e *visibility.Expr) {
	c.cur = e
	f := e.Field
	kind := valueKind(f)
	col := c.valueColumn("a."+attrValueColumn(f.Type), kind)
	elem := c.valueColumn("a.str_value", 's')
	head := func() { c.b.WriteString("a.ord = 0") }
	c.b.WriteByte('(')
	switch e.Op {
	case visibility.OpNull:
		// Null: no row, or an empty Keyword or Text, or a KeywordList without elements.
		c.attrIn(f, !e.Not, func() {
			switch f.Type {
			case enumspb.INDEXED_VALUE_TYPE_KEYWORD, enumspb.INDEXED_VALUE_TYPE_TEXT:
				c.b.WriteString("a.ord = 0 AND a.str_value <> ''")
			case enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST:
				c.b.WriteString("a.ord > 0")
			default:
				head()
			}
		})
	case visibility.OpContains:
		elements := func() {
			c.b.WriteString("a.ord > 0 AND " + elem + " IN (")
			for i, v := range e.Values {
				if i > 0 {
					c.b.WriteString(", ")
				}
				c.arg(v.S)
			}
			c.b.WriteByte(')')
		}
		if !e.Not {
			c.attrIn(f, false, elements)
			break
		}
		c.attrIn(f, false, head)
		c.b.WriteString(" AND ")
		c.attrIn(f, true, elements)
	case visibility.OpWords:
		c.attrIn(f, false, head)
		if len(e.Values) == 0 {
			if e.Not {
				c.b.WriteString(" AND 1 = 0")
			}
			break
		}
		c.b.WriteString(" AND ")
		if e.Not {
			c.b.WriteString("NOT ")
		}
		c.b.WriteByte('(')
		for i, v := range e.Values {
			if i > 0 {
				c.b.WriteString(" AND ")
			}
			c.attrIn(f, false, func() {
				c.b.WriteString("a.ord > 0 AND " + elem + " = ")
				c.arg(v.S)
			})
		}
		c.b.WriteByte(')')
	default:
		c.attrIn(f, false, func() {
			head()
			c.b.WriteString(" AND ")
			c.valuePredicate(col, kind, e)
		})
	}
	c.b.WriteByte(')')
}

func storableQuery(q *visibility.Query, storable func(ss ...string) bool) bool {
	var walk func(e *visibility.Expr) bool
	walk = func(e *visibility.Expr) bool {
		for _, a := range e.Args {
			if !walk(a) {
				return false
			}
		}
		for _, v := range e.Values {
			if !storable(v.S) {
				return false
			}
		}
		return storable(e.Field.Attr)
	}
	for _, o := range q.OrderBy {
		if !storable(o.Field.Attr) {
			return false
		}
	}
	return q.Where == nil || walk(q.Where)
}

// visibilityCursor is the position of a page's last row in the query's order: the value of
// every order key, and the execution's key.
type visibilityCursor struct {
	Keys       []visibility.Value `json:"k,omitempty"`
	BusinessID string             `json:"b"`
	RunID      string             `json:"r"`
}

// visibilityTokenFormat tells a visibility page token from the backends' list tokens.
const visibilityTokenFormat = 'V'

// orderKey is one SQL expression of the ORDER BY, never NULL, with its kind and direction.
type orderKey struct {
	expr string
	kind byte
	desc bool
}

// VisibilityQuery is a compiled visibility query.
//
// Which plan serves a page best depends on how many executions the filter selects, which
// neither backend can tell from its statistics for a bound value: few, and the page is best
// found from the filter's indexes and then sorted; many, and it is best found by walking the
// order's index and testing each row, which stops after a page. So a list first counts each
// predicate's matches up to SelectiveMatches (Probes: each an index range that stops there),
// and Choose compiles the page's statement for the estimate: attribute predicates as sets
// and the order's index kept out of the plan, or as per-row probes and the order's index
// walked. Either way the rows and their order are the same; only the cost differs.
type VisibilityQuery struct {
	// from is the FROM clause with its joins and fromArgs their arguments; keys the ORDER BY
	// keys.
	from     string
	fromArgs []any
	keys     []orderKey
	q        *visibility.Query
	// where is the condition as the plan writes it, with its arguments.
	where Stmt
	// probeStmts count the matches of probeLeaves, estimate combines their counts.
	probeStmts  []Stmt
	probeLeaves []*visibility.Expr
	estimate    func([]int64) int64
	// selective says the filter selects fewer than SelectiveMatches: the order's index is
	// kept out of the plan.
	selective   bool
	namespaceID string
	archetypeID uint32
}

// SelectiveMatches is the number of matches below which a filter is selective: its matches
// are read from its indexes and sorted, rather than found by walking the order's index.
const SelectiveMatches = 2000

// CompileVisibility compiles req.Visibility. storable reports whether strings fit the
// backend's text columns (nil: any): a query comparing with one that does not is refused, as
// no stored value could be compared with it.
func CompileVisibility(req persistence.ListExecutionsRequest, storable func(ss ...string) bool) (*VisibilityQuery, error) {
	q := req.Visibility
	if err := q.Check(); err != nil {
		return nil, fmt.Errorf("%w: %w", persistence.ErrInvalidListRequest, err)
	}
	if req.Status != "" || req.TaskQueue != "" {
		return nil, fmt.Errorf("%w: a visibility query cannot be combined with the indexed-field filters", persistence.ErrInvalidListRequest)
	}
	if storable != nil && !storableQuery(q, storable) {
		return nil, fmt.Errorf("%w: a compared value holds a NUL byte or invalid UTF-8", persistence.ErrInvalidListRequest)
	}
	vq := &VisibilityQuery{q: q, namespaceID: req.NamespaceID, archetypeID: req.ArchetypeID}
	if q.Where != nil {
		c := &compiler{namespaceID: req.NamespaceID, archetypeID: req.ArchetypeID}
		if estimate, ok := c.probePlan(q.Where, &vq.probeStmts, &vq.probeLeaves); ok {
			vq.estimate = estimate
		} else {
			// Without an estimate the plan is for many matches, but a predicate counted is still
			// worth its set when it selects few.
			vq.estimate = func([]int64) int64 { return SelectiveMatches }
		}
	}
	vq.choose(SelectiveMatches, nil) // until the probes say otherwise
	var from strings.Builder
	from.WriteString("visibility v")
	desc := false
	for i, o := range q.OrderBy {
		desc = o.Desc
		if o.Field.Attr == "" {
			vq.keys = append(vq.keys, orderKey{expr: systemColumn[o.Field.Column], kind: valueKind(o.Field), desc: o.Desc})
			continue
		}
		alias := "o" + strconv.Itoa(i)
		fmt.Fprintf(&from, " LEFT JOIN visibility_attributes %[1]s ON %[1]s.namespace_id = v.namespace_id"+
			" AND %[1]s.archetype_id = v.archetype_id AND %[1]s.business_id = v.business_id AND %[1]s.run_id = v.run_id"+
			" AND %[1]s.name = ? AND %[1]s.value_type = ? AND %[1]s.ord = 0", alias)
		vq.fromArgs = append(vq.fromArgs, o.Field.Attr, int64(o.Field.Type))
		kind := valueKind(o.Field)
		zero := "''"
		switch kind {
		case 'i':
			zero = "0"
		case 'f':
			zero = "0.0"
		}
		// Missing last ascending, first descending: a flag orders them, then the value.
		vq.keys = append(vq.keys,
			orderKey{expr: "CASE WHEN " + alias + ".ord IS NULL THEN 1 ELSE 0 END", kind: 'i', desc: o.Desc},
			orderKey{expr: "COALESCE(" + alias + "." + attrValueColumn(o.Field.Type) + ", " + zero + ")", kind: kind, desc: o.Desc})
	}
	// Ties go by the execution's key, in the direction of the last term, so that a single
	// descending term is one backward walk of its index.
	vq.keys = append(vq.keys, orderKey{expr: "v.business_id", kind: 's', desc: desc}, orderKey{expr: "v.run_id", kind: 's', desc: desc})
	vq.from = from.String()
	return vq, nil
}

// MaxProbes bounds the predicates a query's plan is chosen by: a query with more is planned
// as a filter that selects many.
const MaxProbes = 8

// Plan runs the statements that count the matches of the filter's predicates, each up to
// SelectiveMatches (each is one index range that stops there), with count, and chooses the
// plan from their counts (Choose). A query without a filter has none to run.
func (vq *VisibilityQuery) Plan(count func(Stmt) (int64, error)) error {
	if len(vq.probeStmts) == 0 {
		return nil
	}
	counts := make([]int64, len(vq.probeStmts))
	for i, st := range vq.probeStmts {
		n, err := count(st)
		if err != nil {
			return fmt.Errorf("count matches: %w", err)
		}
		counts[i] = n
	}
	vq.Choose(counts)
	return nil
}

// Choose sets the plan from the counts of Probes: an AND matches at most what its most
// selective operand does, an OR at most the sum of its operands. A predicate that selects few
// is written as a set, the others as probes.
func (vq *VisibilityQuery) Choose(counts []int64) {
	if vq.estimate == nil || len(counts) != len(vq.probeStmts) {
		return
	}
	sets := map[*visibility.Expr]bool{}
	for i, leaf := range vq.probeLeaves {
		sets[leaf] = counts[i] < SelectiveMatches
	}
	vq.choose(vq.estimate(counts), sets)
}

func (vq *VisibilityQuery) choose(matches int64, sets map[*visibility.Expr]bool) {
	vq.selective = matches < SelectiveMatches
	c := &compiler{namespaceID: vq.namespaceID, archetypeID: vq.archetypeID, sets: sets}
	c.b.WriteString("v.namespace_id = ? AND v.archetype_id = ?")
	c.args = append(c.args, vq.namespaceID, int64(vq.archetypeID))
	if vq.q.Where != nil {
		c.b.WriteString(" AND ")
		c.expr(vq.q.Where)
	}
	vq.where = Stmt{SQL: c.b.String(), Args: c.args}
}

// probePlan builds the probes of a filter's predicates (leaves, in order) and the function
// that estimates its matches from their counts; ok is false when the filter's matches cannot
// be bounded by such counts (a negated or NULL predicate under an OR, say).
func (c *compiler) probePlan(e *visibility.Expr, probes *[]Stmt, leaves *[]*visibility.Expr) (estimate func([]int64) int64, ok bool) {
	switch e.Op {
	case visibility.OpAnd, visibility.OpOr:
		var parts []func([]int64) int64
		for _, a := range e.Args {
			f, ok := c.probePlan(a, probes, leaves)
			if !ok {
				if e.Op == visibility.OpAnd {
					continue // the other operands still bound an AND
				}
				return nil, false
			}
			parts = append(parts, f)
		}
		if len(parts) == 0 {
			return nil, false
		}
		and := e.Op == visibility.OpAnd
		return func(counts []int64) int64 {
			n := int64(0)
			if and {
				n = SelectiveMatches
			}
			for _, p := range parts {
				if and {
					n = min(n, p(counts))
				} else {
					n = min(int64(SelectiveMatches), n+p(counts))
				}
			}
			return n
		}, true
	}
	if e.Not || e.Op == visibility.OpNull || (e.Op == visibility.OpCompare && e.Cmp == "!=") ||
		(e.Op == visibility.OpWords && len(e.Values) == 0) || len(*probes) == MaxProbes {
		return nil, false // selects most rows, or has no range to count
	}
	p := &compiler{namespaceID: c.namespaceID, archetypeID: c.archetypeID}
	if e.Field.Attr == "" {
		p.b.WriteString("SELECT 1 FROM visibility v WHERE v.namespace_id = ? AND v.archetype_id = ? AND ")
		p.args = append(p.args, c.namespaceID, int64(c.archetypeID))
		p.expr(e)
	} else {
		p.b.WriteString("SELECT 1 FROM visibility_attributes a WHERE a.namespace_id = ? AND a.archetype_id = ? AND a.name = ? AND a.value_type = ? AND ")
		p.args = append(p.args, c.namespaceID, int64(c.archetypeID), e.Field.Attr, int64(e.Field.Type))
		switch e.Op {
		case visibility.OpContains:
			p.b.WriteString("a.ord > 0 AND a.str_value IN (")
			for i, v := range e.Values {
				if i > 0 {
					p.b.WriteString(", ")
				}
				p.arg(v.S)
			}
			p.b.WriteByte(')')
		case visibility.OpWords:
			p.b.WriteString("a.ord > 0 AND a.str_value = ")
			p.arg(e.Values[0].S)
		default:
			p.b.WriteString("a.ord = 0 AND ")
			p.valuePredicate("a."+attrValueColumn(e.Field.Type), valueKind(e.Field), e)
		}
	}
	i := len(*probes)
	*probes = append(*probes, Stmt{SQL: "SELECT COUNT(*) FROM (" + p.b.String() + " LIMIT ?) m", Args: append(p.args, int64(SelectiveMatches))})
	*leaves = append(*leaves, e)
	return func(counts []int64) int64 { return counts[i] }, true
}

// sortExpr is an order key as ORDER BY names it: for a selective filter, as an expression no
// index provides (the value unchanged), so that the plan reads the filter's matches and sorts
// them instead of walking the order's index past every row the filter refuses.
func (vq *VisibilityQuery) sortExpr(k orderKey) string {
	if !vq.selective {
		return k.expr
	}
	switch k.kind {
	case 'i':
		return k.expr + " + 0"
	case 'f':
		return k.expr + " + 0.0"
	}
	return k.expr + " || ''"
}

// ListSQL returns the query of one page: every column of the execution, then the order keys;
// after is the previous page's token (nil for the first). The page's keys are found and
// sorted first, and only then joined with the executions, so a sort handles keys, not states.
func (vq *VisibilityQuery) ListSQL(after []byte, pageSize int) (string, []any, error) {
	args := append(append([]any{}, vq.fromArgs...), vq.where.Args...)
	where := vq.where.SQL
	if after != nil {
		cur, err := decodeCursor(after, len(vq.keys)-2)
		if err != nil {
			return "", nil, err
		}
		vals := make([]any, 0, len(vq.keys))
		for i, k := range vq.keys[:len(vq.keys)-2] {
			vals = append(vals, valueArg(k.kind, cur.Keys[i]))
		}
		vals = append(vals, cur.BusinessID, cur.RunID)
		cond, condArgs := keysetCondition(vq.keys, vals)
		where += " AND " + cond
		args = append(args, condArgs...)
	}
	var inner, outer, order, outerOrder strings.Builder
	nk := len(vq.keys) - 2
	for i, k := range vq.keys {
		if i > 0 {
			order.WriteString(", ")
			outerOrder.WriteString(", ")
		}
		order.WriteString(vq.sortExpr(k))
		name := "p.k" + strconv.Itoa(i)
		switch i {
		case nk:
			name = "p.bid"
		case nk + 1:
			name = "p.rid"
		default:
			inner.WriteString(", " + k.expr + " AS k" + strconv.Itoa(i))
			outer.WriteString(", " + name)
		}
		outerOrder.WriteString(name)
		if k.desc {
			order.WriteString(" DESC")
			outerOrder.WriteString(" DESC")
		}
	}
	args = append(args, ListLimit(pageSize), vq.namespaceID, int64(vq.archetypeID))
	return `SELECT p.bid, p.rid, e.db_version, e.lifecycle, e.state, e.idx_status, e.idx_task_queue` + outer.String() +
		` FROM (SELECT v.business_id AS bid, v.run_id AS rid` + inner.String() + ` FROM ` + vq.from + ` WHERE ` + where +
		` ORDER BY ` + order.String() + ` LIMIT ?) p JOIN executions e ON e.namespace_id = ? AND e.archetype_id = ?` +
		` AND e.business_id = p.bid AND e.run_id = p.rid ORDER BY ` + outerOrder.String(), args, nil
}

// CountSQL returns the query counting the matches by status: rows of (status, count).
func (vq *VisibilityQuery) CountSQL() (string, []any) {
	// Grouped by an expression no index provides when the filter is selective, as ORDER BY
	// is (sortExpr): the matches are read from the filter's indexes, not from a walk of the
	// status index.
	status := vq.sortExpr(orderKey{expr: "v.status", kind: 'i'})
	return `SELECT ` + status + `, COUNT(*) FROM visibility v WHERE ` + vq.where.SQL + ` GROUP BY ` + status, vq.where.Args
}

// keysetCondition is "the row comes after vals in the order of keys". With one direction it
// is a row-value comparison, which both backends turn into an index range; mixed directions
// need the expanded form.
func keysetCondition(keys []orderKey, vals []any) (string, []any) {
	mixed := false
	for _, k := range keys {
		mixed = mixed || k.desc != keys[0].desc
	}
	var b strings.Builder
	var args []any
	if !mixed {
		b.WriteByte('(')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(k.expr)
		}
		if keys[0].desc {
			b.WriteString(") < (")
		} else {
			b.WriteString(") > (")
		}
		b.WriteString(strings.TrimSuffix(strings.Repeat("?, ", len(keys)), ", ") + ")")
		return b.String(), vals
	}
	b.WriteByte('(')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteByte('(')
		for j := range i {
			b.WriteString(keys[j].expr + " = ? AND ")
			args = append(args, vals[j])
		}
		if k.desc {
			b.WriteString(k.expr + " < ?")
		} else {
			b.WriteString(k.expr + " > ?")
		}
		args = append(args, vals[i])
		b.WriteByte(')')
	}
	b.WriteByte(')')
	return b.String(), args
}

// ScanVisibilityPage reads the rows of ListSQL into a page of at most pageSize executions and
// the next page's token.
func (vq *VisibilityQuery) ScanVisibilityPage(rows Rows, namespaceID string, archetypeID uint32, pageSize int) (*persistence.ListExecutionsResponse, error) {
	p := vq.newPage(namespaceID, archetypeID, pageSize)
	return p.resp, p.scan(rows)
}

// pageBuilder fills a page from one or more result sets, in order.
type pageBuilder struct {
	vq          *VisibilityQuery
	namespaceID string
	archetypeID uint32
	pageSize    int
	resp        *persistence.ListExecutionsResponse
	last        visibilityCursor
	full        bool
}

func (vq *VisibilityQuery) newPage(namespaceID string, archetypeID uint32, pageSize int) *pageBuilder {
	return &pageBuilder{vq: vq, namespaceID: namespaceID, archetypeID: archetypeID, pageSize: pageSize,
		resp: &persistence.ListExecutionsResponse{}}
}

// scan adds rows of a page statement; once a row beyond the page is read, it sets the token.
func (p *pageBuilder) scan(rows Rows) error {
	nk := len(p.vq.keys) - 2
	for !p.full && rows.Next() {
		if len(p.resp.Executions) == p.pageSize {
			b, _ := json.Marshal(p.last) // plain struct
			p.resp.NextPageToken = append([]byte{visibilityTokenFormat}, b...)
			p.full = true
			break
		}
		rec := &persistence.ExecutionRecord{Key: persistence.ExecutionKey{NamespaceID: p.namespaceID, ArchetypeID: p.archetypeID}}
		keys := make([]visibility.Value, nk)
		dest := []any{&rec.Key.BusinessID, &rec.Key.RunID, &rec.DBVersion, &rec.Lifecycle, &rec.State,
			&rec.Indexed.Status, &rec.Indexed.TaskQueue}
		for i, k := range p.vq.keys[:nk] {
			switch k.kind {
			case 'i':
				dest = append(dest, &keys[i].I)
			case 'f':
				dest = append(dest, &keys[i].F)
			default:
				dest = append(dest, &keys[i].S)
			}
		}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		p.resp.Executions = append(p.resp.Executions, rec)
		p.last = visibilityCursor{Keys: keys, BusinessID: rec.Key.BusinessID, RunID: rec.Key.RunID}
	}
	return rows.Err()
}

// attributeOrderParts returns, for a query ordered by one custom attribute whose filter is
// not selective, the statements of its page in order: the executions that have the
// attribute, walked along the attribute's value index, and those that lack it, walked along
// the primary key (first for a descending order, which puts them first). Each reads at most
// limit rows; the part the token lies in starts after it, earlier parts are skipped. nil when
// the query is not of that form: sorting its matches is then the plan.
func (vq *VisibilityQuery) attributeOrderParts(after []byte, limit int64) ([]orderPart, error) {
	if vq.selective || len(vq.q.OrderBy) != 1 || vq.q.OrderBy[0].Field.Attr == "" {
		return nil, nil
	}
	o := vq.q.OrderBy[0]
	var cur *visibilityCursor
	if after != nil {
		var err error
		if cur, err = decodeCursor(after, 2); err != nil {
			return nil, err
		}
	}
	dir, cmp := "", ">"
	if o.Desc {
		dir, cmp = " DESC", "<"
	}
	col := attrValueColumn(o.Field.Type)
	kind := valueKind(o.Field)
	zero := map[byte]string{'i': "0", 'f': "0.0", 's': "''"}[kind]
	tail := ` JOIN executions e ON e.namespace_id = ? AND e.archetype_id = ? AND e.business_id = p.bid AND e.run_id = p.rid` +
		` ORDER BY p.k1` + dir + `, p.bid` + dir + `, p.rid` + dir
	head := `SELECT p.bid, p.rid, e.db_version, e.lifecycle, e.state, e.idx_status, e.idx_task_queue, p.k0, p.k1 FROM (`

	have := func(c *visibilityCursor) Stmt {
		args := append([]any{vq.namespaceID, int64(vq.archetypeID), o.Field.Attr, int64(o.Field.Type)}, vq.where.Args...)
		keyset := ""
		if c != nil {
			keyset = ` AND (o.` + col + `, o.business_id, o.run_id) ` + cmp + ` (?, ?, ?)`
			args = append(args, valueArg(kind, c.Keys[1]), c.BusinessID, c.RunID)
		}
		args = append(args, limit, vq.namespaceID, int64(vq.archetypeID))
		return Stmt{SQL: head + `SELECT o.business_id AS bid, o.run_id AS rid, 0 AS k0, o.` + col + ` AS k1` +
			` FROM visibility_attributes o JOIN visibility v ON v.namespace_id = o.namespace_id AND v.archetype_id = o.archetype_id` +
			` AND v.business_id = o.business_id AND v.run_id = o.run_id` +
			` WHERE o.namespace_id = ? AND o.archetype_id = ? AND o.name = ? AND o.value_type = ? AND o.ord = 0` +
			` AND o.` + col + ` IS NOT NULL AND ` + vq.where.SQL + keyset +
			` ORDER BY o.` + col + dir + `, o.business_id` + dir + `, o.run_id` + dir + ` LIMIT ?) p` + tail, Args: args}
	}
	lack := func(c *visibilityCursor) Stmt {
		args := append(append([]any{}, vq.where.Args...), o.Field.Attr, int64(o.Field.Type))
		keyset := ""
		if c != nil {
			keyset = ` AND (v.business_id, v.run_id) ` + cmp + ` (?, ?)`
			args = append(args, c.BusinessID, c.RunID)
		}
		args = append(args, limit, vq.namespaceID, int64(vq.archetypeID))
		return Stmt{SQL: head + `SELECT v.business_id AS bid, v.run_id AS rid, 1 AS k0, ` + zero + ` AS k1 FROM visibility v` +
			` WHERE ` + vq.where.SQL + ` AND NOT EXISTS (SELECT 1 FROM visibility_attributes a WHERE a.namespace_id = v.namespace_id` +
			` AND a.archetype_id = v.archetype_id AND a.business_id = v.business_id AND a.run_id = v.run_id` +
			` AND a.name = ? AND a.value_type = ? AND a.ord = 0)` + keyset +
			` ORDER BY v.business_id` + dir + `, v.run_id` + dir + ` LIMIT ?) p` + tail, Args: args}
	}
	// Each part with the flag its rows carry in the order (0: has the attribute, 1: lacks it).
	parts := []func(*visibilityCursor) Stmt{have, lack}
	flags := []int64{0, 1}
	if o.Desc {
		parts, flags = []func(*visibilityCursor) Stmt{lack, have}, []int64{1, 0}
	}
	var out []orderPart
	for i, part := range parts {
		switch {
		case cur == nil:
			out = append(out, orderPart{Stmt: part(nil), lacks: flags[i] == 1})
		case cur.Keys[0].I == flags[i]:
			out = append(out, orderPart{Stmt: part(cur), lacks: flags[i] == 1})
			cur = nil // the parts after the cursor's start at their beginning
		}
	}
	return out, nil
}

// orderPart is one part of a page ordered by a custom attribute; lacks marks the part of the
// executions that lack it.
type orderPart struct {
	Stmt
	lacks bool
}

// lackingSQL counts the executions that lack the attribute of a query ordered by it, as the
// difference of two index counts: when it is zero, the part that lacks it is empty, which
// only a walk of every execution could otherwise tell.
func (vq *VisibilityQuery) lackingSQL() Stmt {
	f := vq.q.OrderBy[0].Field
	return Stmt{SQL: `SELECT (SELECT COUNT(*) FROM visibility WHERE namespace_id = ? AND archetype_id = ?) -` +
		` (SELECT COUNT(*) FROM visibility_attributes WHERE namespace_id = ? AND archetype_id = ? AND name = ?` +
		` AND value_type = ? AND ord = 0)`,
		Args: []any{vq.namespaceID, int64(vq.archetypeID), vq.namespaceID, int64(vq.archetypeID), f.Attr, int64(f.Type)}}
}

func decodeCursor(tok []byte, keys int) (*visibilityCursor, error) {
	if len(tok) == 0 || tok[0] != visibilityTokenFormat {
		return nil, ErrInvalidPageToken
	}
	var cur visibilityCursor
	if err := json.Unmarshal(tok[1:], &cur); err != nil || len(cur.Keys) != keys {
		return nil, ErrInvalidPageToken
	}
	return &cur, nil
}

// ScanStatusCounts reads the rows of CountSQL.
func ScanStatusCounts(rows Rows) (total int64, byStatus map[int32]int64, err error) {
	byStatus = map[int32]int64{}
	for rows.Next() {
		var st int32
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return 0, nil, err
		}
		byStatus[st] += n
		total += n
	}
	return total, byStatus, rows.Err()
}

// Backfill SQL, shared by both backends.
const (
	// QBackfillDone tells whether an archetype was backfilled.
	QBackfillDone = `SELECT COUNT(*) FROM visibility_backfill WHERE archetype_id = ?`
	// QBackfillMark records that it was.
	QBackfillMark = `INSERT INTO visibility_backfill (archetype_id) VALUES (?) ON CONFLICT (archetype_id) DO NOTHING`
	// QBackfillScan reads, in primary-key order after a position, the executions of an
	// archetype that have no visibility row.
	QBackfillScan = `SELECT e.namespace_id, e.business_id, e.run_id, e.state FROM executions e
		WHERE (e.namespace_id, e.archetype_id, e.business_id, e.run_id) > (?, ?, ?, ?) AND e.archetype_id = ?
		AND NOT EXISTS (SELECT 1 FROM visibility v WHERE v.namespace_id = e.namespace_id
			AND v.archetype_id = e.archetype_id AND v.business_id = e.business_id AND v.run_id = e.run_id)
		ORDER BY e.namespace_id, e.archetype_id, e.business_id, e.run_id LIMIT ?`
	// BackfillChunk is how many executions one scan reads.
	BackfillChunk = 500
)

// BackfillRow is an execution QBackfillScan read.
type BackfillRow struct {
	Key   persistence.ExecutionKey
	State []byte
}

// ScanBackfillRows reads the rows of QBackfillScan.
func ScanBackfillRows(rows Rows, archetypeID uint32) ([]BackfillRow, error) {
	var out []BackfillRow
	for rows.Next() {
		r := BackfillRow{Key: persistence.ExecutionKey{ArchetypeID: archetypeID}}
		if err := rows.Scan(&r.Key.NamespaceID, &r.Key.BusinessID, &r.Key.RunID, &r.State); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Backfill runs a backfill inside the backend's transaction: scan reads the next chunk after
// a key (QBackfillScan), exec runs a statement. It returns how many records it wrote. A state
// derive cannot read fails the backfill, naming the execution: its record would otherwise be
// missing from every listing for good.
func Backfill(archetypeID uint32, scan func(after persistence.ExecutionKey) ([]BackfillRow, error),
	exec func(sql string, args ...any) error, derive func(state []byte) (*visibility.Record, error),
) (int, error) {
	n := 0
	after := persistence.ExecutionKey{ArchetypeID: archetypeID}
	for {
		rows, err := scan(after)
		if err != nil {
			return n, fmt.Errorf("read executions: %w", err)
		}
		for _, row := range rows {
			rec, err := derive(row.State)
			if err != nil {
				return n, fmt.Errorf("derive the visibility of %s: %w", KeyString(row.Key), err)
			}
			if rec == nil {
				continue
			}
			for _, st := range VisibilityWriteStmts(&persistence.ExecutionWrite{Mode: persistence.WriteModeCreate, Key: row.Key, Visibility: rec}) {
				if err := exec(st.SQL, st.Args...); err != nil {
					return n, fmt.Errorf("write the visibility of %s: %w", KeyString(row.Key), err)
				}
			}
			n++
		}
		if len(rows) < BackfillChunk {
			return n, exec(QBackfillMark, int64(archetypeID))
		}
		after = rows[len(rows)-1].Key
	}
}

// VisibilityDB is how the shared visibility reads reach a backend: Query runs a statement
// compiled here ("?" placeholders) and returns its rows and how to close them.
type VisibilityDB struct {
	Query func(sql string, args ...any) (Rows, func(), error)
	// Storable reports whether strings fit the backend's text columns (nil: any).
	Storable func(ss ...string) bool
}

func (db VisibilityDB) Count(st Stmt) (int64, error) {
	rows, closeRows, err := db.Query(st.SQL, st.Args...)
	if err != nil {
		return 0, err
	}
	defer closeRows()
	var n int64
	if rows.Next() {
		err = rows.Scan(&n)
	}
	if err == nil {
		err = rows.Err()
	}
	return n, err
}

// ListVisibility serves a ListExecutions with a visibility query: the plan is chosen by
// counting the predicates, then one statement reads the page.
func ListVisibility(req persistence.ListExecutionsRequest, db VisibilityDB) (*persistence.ListExecutionsResponse, error) {
	vq, err := CompileVisibility(req, db.Storable)
	if err != nil {
		return nil, err
	}
	if err := vq.Plan(db.Count); err != nil {
		return nil, err
	}
	parts, err := vq.attributeOrderParts(req.NextPageToken, ListLimit(req.PageSize))
	if err != nil {
		return nil, err
	}
	if parts != nil {
		page := vq.newPage(req.NamespaceID, req.ArchetypeID, req.PageSize)
		for i, st := range parts {
			if page.full {
				break
			}
			if st.lacks && i == 0 && len(parts) > 1 {
				// First (a descending order): skip it when no execution lacks the attribute.
				lacking, err := db.Count(vq.lackingSQL())
				if err != nil {
					return nil, err
				}
				if lacking == 0 {
					continue
				}
			}
			rows, closeRows, err := db.Query(st.SQL, st.Args...)
			if err != nil {
				return nil, err
			}
			err = page.scan(rows)
			closeRows()
			if err != nil {
				return nil, err
			}
		}
		return page.resp, nil
	}
	query, args, err := vq.ListSQL(req.NextPageToken, req.PageSize)
	if err != nil {
		return nil, err
	}
	rows, closeRows, err := db.Query(query, args...)
	if err != nil {
		return nil, err
	}
	defer closeRows()
	return vq.ScanVisibilityPage(rows, req.NamespaceID, req.ArchetypeID, req.PageSize)
}

// CountVisibility serves a CountVisibility: the matches of req.Visibility, in all and by
// status.
func CountVisibility(req persistence.ListExecutionsRequest, db VisibilityDB) (int64, map[int32]int64, error) {
	if req.Visibility == nil {
		return 0, nil, fmt.Errorf("%w: no visibility query", persistence.ErrInvalidListRequest)
	}
	vq, err := CompileVisibility(req, db.Storable)
	if err != nil {
		return 0, nil, err
	}
	if err := vq.Plan(db.Count); err != nil {
		return 0, nil, err
	}
	query, args := vq.CountSQL()
	rows, closeRows, err := db.Query(query, args...)
	if err != nil {
		return 0, nil, err
	}
	defer closeRows()
	return ScanStatusCounts(rows)
}
