package query

import (
	"fmt"
	"strings"
)

type tokenKind int

const (
	tokEOF tokenKind = iota
	tokIdent
	tokString
	tokNumber
	tokOp // = != <> < > <= >=
	tokLParen
	tokRParen
	tokComma
)

func (k tokenKind) String() string {
	switch k {
	case tokEOF:
		return "end of query"
	case tokIdent:
		return "identifier"
	case tokString:
		return "string"
	case tokNumber:
		return "number"
	case tokOp:
		return "operator"
	case tokLParen:
		return "'('"
	case tokRParen:
		return "')'"
	case tokComma:
		return "','"
	}
	return "token"
}

type token struct {
	kind tokenKind
	// text is the identifier, the operator, or the string literal's unescaped value.
	text string
	// quoted marks identifiers written in backticks: never keywords.
	quoted bool
	// pos is the byte offset of the token's first character.
	pos int
}

// describe names the token for error messages.
func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "end of query"
	case tokString:
		return fmt.Sprintf("string %q", t.text)
	case tokLParen, tokRParen, tokComma:
		return t.kind.String()
	}
	return fmt.Sprintf("%q", t.text)
}

// keyword reports whether t is the (case-insensitive) keyword kw.
func (t token) keyword(kw string) bool {
	return t.kind == tokIdent && !t.quoted && strings.EqualFold(t.text, kw)
}

func lex(input string) ([]token, error) {
	var tokens []token
	i := 0
	for i < len(input) {
		c := input[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(':
			tokens = append(tokens, token{kind: tokLParen, text: "(", pos: i})
			i++
		case c == ')':
			tokens = append(tokens, token{kind: tokRParen, text: ")", pos: i})
			i++
		case c == ',':
			tokens = append(tokens, token{kind: tokComma, text: ",", pos: i})
			i++
		case c == '=':
			tokens = append(tokens, token{kind: tokOp, text: "=", pos: i})
			i++
		case c == '!':
			if i+1 < len(input) && input[i+1] == '=' {
				tokens = append(tokens, token{kind: tokOp, text: "!=", pos: i})
				i += 2
				continue
			}
			return nil, errorAt(i, "unexpected '!' (did you mean '!='?)")
		case c == '<' || c == '>':
			op := string(c)
			if i+1 < len(input) && (input[i+1] == '=' || (c == '<' && input[i+1] == '>')) {
				op += string(input[i+1])
			}
			if op == "<>" {
				op = "!="
			}
			tokens = append(tokens, token{kind: tokOp, text: op, pos: i})
			i += len(opSource(input[i:]))
		case c == '\'' || c == '"':
			s, n, err := lexString(input, i)
			if err != nil {
				return nil, err
			}
			tokens = append(tokens, token{kind: tokString, text: s, pos: i})
			i += n
		case c == '`':
			end := strings.IndexByte(input[i+1:], '`')
			if end < 0 {
				return nil, errorAt(i, "unterminated `quoted` name")
			}
			tokens = append(tokens, token{kind: tokIdent, text: input[i+1 : i+1+end], quoted: true, pos: i})
			i += end + 2
		case isIdentStart(c):
			j := i + 1
			for j < len(input) && isIdentPart(input[j]) {
				j++
			}
			tokens = append(tokens, token{kind: tokIdent, text: input[i:j], pos: i})
			i = j
		case c >= '0' && c <= '9' || c == '-':
			j := i + 1
			for j < len(input) && (input[j] >= '0' && input[j] <= '9' || input[j] == '.') {
				j++
			}
			tokens = append(tokens, token{kind: tokNumber, text: input[i:j], pos: i})
			i = j
		default:
			return nil, errorAt(i, "unexpected character %q", rune(c))
		}
	}
	tokens = append(tokens, token{kind: tokEOF, pos: len(input)})
	return tokens, nil
}

// opSource returns the source text of the comparison operator at the start of s.
func opSource(s string) string {
	if len(s) > 1 && (s[1] == '=' || (s[0] == '<' && s[1] == '>')) {
		return s[:2]
	}
	return s[:1]
}

// lexString reads a string literal starting at input[start] (a quote). Inside, the other
// quote character is literal, the same quote is written twice or escaped with a backslash, and
// a backslash escapes any character. It returns the value and the literal's length in bytes.
func lexString(input string, start int) (string, int, error) {
	quote := input[start]
	var b strings.Builder
	i := start + 1
	for i < len(input) {
		c := input[i]
		switch {
		case c == '\\':
			if i+1 >= len(input) {
				return "", 0, errorAt(i, "unterminated string (backslash at end of query)")
			}
			b.WriteByte(input[i+1])
			i += 2
		case c == quote:
			if i+1 < len(input) && input[i+1] == quote {
				b.WriteByte(quote)
				i += 2
				continue
			}
			return b.String(), i + 1 - start, nil
		default:
			b.WriteByte(c)
			i++
		}
	}
	return "", 0, errorAt(start, "unterminated string")
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentPart(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
