package query

import (
	"strings"
	"time"
)

// Grammar (keywords and columns case-insensitive):
//
//	query      = [ or ]
//	or         = and { OR and }
//	and        = primary { AND primary }
//	primary    = "(" or ")" | predicate
//	predicate  = column op value
//	           | column [NOT] STARTS_WITH value
//	           | column [NOT] IN "(" value { "," value } ")"
//	           | column [NOT] BETWEEN value AND value
//	           | column IS [NOT] NULL
//	op         = "=" | "!=" | "<>" | "<" | ">" | "<=" | ">="
//	value      = 'single-quoted' | "double-quoted" | number | true | false
//
// An activity query may end with clauses (clauses.go):
//
//	query      = [ or ] [ ORDER BY column [ASC|DESC] { "," column [ASC|DESC] } ]
//	                    [ GROUP BY ExecutionStatus ]
type parser struct {
	sch    *schema
	tokens []token
	i      int
}

func (p *parser) peek() token { return p.tokens[p.i] }

func (p *parser) next() token {
	t := p.tokens[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

func (p *parser) parseOr(depth int) (node, error) {
	if depth > MaxDepth {
		return nil, errorAt(p.peek().pos, "query is nested deeper than %d levels", MaxDepth)
	}
	first, err := p.parseAnd(depth)
	if err != nil {
		return nil, err
	}
	terms := []node{first}
	for p.peek().keyword("OR") {
		p.next()
		term, err := p.parseAnd(depth)
		if err != nil {
			return nil, err
		}
		terms = append(terms, term)
	}
	if len(terms) == 1 {
		return first, nil
	}
	return orNode(terms), nil
}

func (p *parser) parseAnd(depth int) (node, error) {
	first, err := p.parsePrimary(depth)
	if err != nil {
		return nil, err
	}
	terms := []node{first}
	for p.peek().keyword("AND") {
		p.next()
		term, err := p.parsePrimary(depth)
		if err != nil {
			return nil, err
		}
		terms = append(terms, term)
	}
	if len(terms) == 1 {
		return first, nil
	}
	return andNode(terms), nil
}

func (p *parser) parsePrimary(depth int) (node, error) {
	t := p.peek()
	switch {
	case t.kind == tokLParen:
		p.next()
		inner, err := p.parseOr(depth + 1)
		if err != nil {
			return nil, err
		}
		if closing := p.next(); closing.kind != tokRParen {
			return nil, errorAt(closing.pos, "expected ')' to close '(' at position %d, found %s", t.pos+1, closing.describe())
		}
		return inner, nil
	case t.kind == tokIdent && !t.quoted && isReserved(t.text):
		return nil, errorAt(t.pos, "expected a column name or '(', found keyword %s", strings.ToUpper(t.text))
	case t.kind == tokIdent:
		return p.parsePredicate()
	}
	return nil, errorAt(t.pos, "expected a column name or '(', found %s", t.describe())
}

func isReserved(word string) bool {
	switch strings.ToUpper(word) {
	case "AND", "OR", "NOT", "IN", "IS", "NULL", "BETWEEN", "STARTS_WITH", "ORDER", "GROUP", "BY":
		return true
	}
	return false
}

func (p *parser) parsePredicate() (node, error) {
	colTok := p.next()
	col, ok := p.sch.lookupColumn(colTok.text)
	if !ok {
		return nil, errorAt(colTok.pos, "unknown column %q (known columns: %s)", colTok.text, strings.Join(p.sch.names(), ", "))
	}
	opTok := p.next()
	switch {
	case opTok.kind == tokOp:
		return p.parseComparison(col, opTok)
	case opTok.keyword("STARTS_WITH"):
		return p.parseStartsWith(col, opTok, false)
	case opTok.keyword("IN"):
		return p.parseIn(col, opTok, false)
	case opTok.keyword("BETWEEN"):
		return p.parseBetween(col, opTok, false)
	case opTok.keyword("IS"):
		return p.parseIsNull(col, opTok)
	case opTok.keyword("NOT"):
		negated := p.next()
		switch {
		case negated.keyword("STARTS_WITH"):
			return p.parseStartsWith(col, negated, true)
		case negated.keyword("IN"):
			return p.parseIn(col, negated, true)
		case negated.keyword("BETWEEN"):
			return p.parseBetween(col, negated, true)
		}
		return nil, errorAt(negated.pos, "expected STARTS_WITH, IN or BETWEEN after NOT, found %s", negated.describe())
	}
	return nil, errorAt(opTok.pos, "expected an operator after %s, found %s", col.name, opTok.describe())
}

func (p *parser) parseComparison(col *column, opTok token) (node, error) {
	op := opTok.text
	switch col.typ {
	case intColumn, doubleColumn, durationColumn, boolColumn, keywordListColumn, textColumn:
		return p.parseCustomComparison(col, opTok)
	case stringColumn, statusColumn:
		if op != "=" && op != "!=" {
			return nil, errorAt(opTok.pos, "operator %s is not supported for %s (use =, !=, STARTS_WITH or IN)", op, col.name)
		}
		if col.typ == statusColumn {
			status, err := p.statusValue(col)
			if err != nil {
				return nil, err
			}
			return &statusIn{sch: p.sch, values: []int32{status}, not: op == "!="}, nil
		}
		value, err := p.stringValue(col)
		if err != nil {
			return nil, err
		}
		return &stringCompare{col: col, op: op, value: value}, nil
	default:
		value, err := p.timeValue(col)
		if err != nil {
			return nil, err
		}
		return &timeCompare{col: col, op: op, value: value}, nil
	}
}

func (p *parser) parseStartsWith(col *column, opTok token, not bool) (node, error) {
	if col.typ != stringColumn {
		return nil, errorAt(opTok.pos, "STARTS_WITH is not supported for %s", col.name)
	}
	value, err := p.stringValue(col)
	if err != nil {
		return nil, err
	}
	op := "STARTS_WITH"
	if not {
		op = "NOT STARTS_WITH"
	}
	return &stringCompare{col: col, op: op, value: value}, nil
}

func (p *parser) parseIn(col *column, opTok token, not bool) (node, error) {
	switch col.typ {
	case timeColumn, boolColumn, textColumn:
		return nil, errorAt(opTok.pos, "IN is not supported for %s", col.name)
	}
	if open := p.next(); open.kind != tokLParen {
		return nil, errorAt(open.pos, "expected '(' after IN, found %s", open.describe())
	}
	var strs []string
	var statuses []int32
	var nums []numLiteral
	for {
		if isNumeric(col.typ) {
			v, err := p.numValue(col)
			if err != nil {
				return nil, err
			}
			nums = append(nums, v)
		} else if col.typ == statusColumn {
			status, err := p.statusValue(col)
			if err != nil {
				return nil, err
			}
			statuses = append(statuses, status)
		} else {
			value, err := p.stringValue(col)
			if err != nil {
				return nil, err
			}
			strs = append(strs, value)
		}
		sep := p.next()
		if sep.kind == tokRParen {
			break
		}
		if sep.kind != tokComma {
			return nil, errorAt(sep.pos, "expected ',' or ')' in IN list, found %s", sep.describe())
		}
	}
	switch {
	case col.typ == statusColumn:
		return &statusIn{sch: p.sch, values: statuses, not: not, list: true}, nil
	case isNumeric(col.typ):
		return &numIn{col: col, values: nums, not: not}, nil
	case col.typ == keywordListColumn:
		return &listContains{col: col, values: strs, not: not, list: true}, nil
	}
	return &stringIn{col: col, values: strs, not: not}, nil
}

func (p *parser) parseBetween(col *column, opTok token, not bool) (node, error) {
	if isNumeric(col.typ) {
		from, err := p.numValue(col)
		if err != nil {
			return nil, err
		}
		if and := p.next(); !and.keyword("AND") {
			return nil, errorAt(and.pos, "expected AND in BETWEEN, found %s", and.describe())
		}
		to, err := p.numValue(col)
		if err != nil {
			return nil, err
		}
		return &numBetween{col: col, from: from, to: to, not: not}, nil
	}
	if col.typ != timeColumn {
		return nil, errorAt(opTok.pos, "BETWEEN is only supported for times (%s) and numbers, not %s", strings.Join(p.sch.timeColumns(), ", "), col.name)
	}
	from, err := p.timeValue(col)
	if err != nil {
		return nil, err
	}
	if and := p.next(); !and.keyword("AND") {
		return nil, errorAt(and.pos, "expected AND in BETWEEN, found %s", and.describe())
	}
	to, err := p.timeValue(col)
	if err != nil {
		return nil, err
	}
	return &timeBetween{col: col, from: from, to: to, not: not}, nil
}

func (p *parser) parseIsNull(col *column, opTok token) (node, error) {
	if col.typ == statusColumn {
		return nil, errorAt(opTok.pos, "IS NULL is not supported for %s", col.name)
	}
	not := false
	t := p.next()
	if t.keyword("NOT") {
		not = true
		t = p.next()
	}
	if !t.keyword("NULL") {
		return nil, errorAt(t.pos, "expected NULL after IS, found %s", t.describe())
	}
	return &isNull{col: col, not: not}, nil
}

func (p *parser) stringValue(col *column) (string, error) {
	t := p.next()
	if t.kind != tokString {
		return "", errorAt(t.pos, "expected a quoted string value for %s, found %s", col.name, t.describe())
	}
	return t.text, nil
}

func (p *parser) statusValue(col *column) (int32, error) {
	t := p.peek()
	s, err := p.stringValue(col)
	if err != nil {
		return 0, err
	}
	status, ok := p.sch.parseStatus(s)
	if !ok {
		return 0, errorAt(t.pos, "unknown %s %q (use %s)", col.name, s, p.sch.statusHint)
	}
	return status, nil
}

func (p *parser) timeValue(col *column) (time.Time, error) {
	t := p.peek()
	s, err := p.stringValue(col)
	if err != nil {
		return time.Time{}, err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errorAt(t.pos, "%s value %q is not an RFC3339 time (e.g. 2025-01-31T15:04:05Z)", col.name, s)
	}
	return v, nil
}
