// Package visibility is what a store indexes of an execution so that listings can filter, sort
// and page without decoding execution state: the system attributes (type, task queue, status,
// start and close times...) and the custom search attributes in typed form, as a Record; and
// the queries over them, as a Query the store compiles to SQL.
//
// It sits below every layer that handles it: the frontend compiles its query language into a
// Query, the Activity component derives its Record, history carries both, and each store
// backend keeps the Record in its visibility tables, written in the same transaction as the
// execution's state.
package visibility

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
)

// Record is an execution's visibility: what queries can filter, sort and group by.
type Record struct {
	// TypeName is the execution's type (an activity's ActivityType).
	TypeName  string
	TaskQueue string
	// WorkerInstanceKey is the worker running the current attempt, empty while none does.
	WorkerInstanceKey string
	// Status is the public execution status (an enumspb.ActivityExecutionStatus).
	Status int32
	// StartTime, ExecutionTime and CloseTime are zero when unknown (CloseTime: while running).
	// ExecutionTime is when the execution may first run: an activity's schedule time plus its
	// start delay, as Temporal's execution_time.
	StartTime     time.Time
	ExecutionTime time.Time
	CloseTime     time.Time
	// Attributes are the custom search attributes, sorted by name.
	Attributes []Attribute
}

// Attribute is one custom search attribute's value, typed by the type it was stored with.
type Attribute struct {
	Name string
	Type enumspb.IndexedValueType
	// Str holds a Keyword or Text value, and a Datetime as DatetimeString writes it.
	Str string
	// Int holds an Int value, and a Bool as 0 or 1.
	Int int64
	// Double holds a Double value.
	Double float64
	// List holds a KeywordList's distinct elements, or a Text value's distinct words
	// (Words), sorted.
	List []string
}

// Duration is CloseTime - StartTime; false while either is unknown.
func (r *Record) Duration() (time.Duration, bool) {
	if r.StartTime.IsZero() || r.CloseTime.IsZero() {
		return 0, false
	}
	return r.CloseTime.Sub(r.StartTime), true
}

// Equal reports whether two records index the same values; nil equals only nil.
func (r *Record) Equal(o *Record) bool {
	if r == nil || o == nil {
		return r == o
	}
	return r.TypeName == o.TypeName && r.TaskQueue == o.TaskQueue && r.WorkerInstanceKey == o.WorkerInstanceKey &&
		r.Status == o.Status && r.StartTime.Equal(o.StartTime) && r.ExecutionTime.Equal(o.ExecutionTime) &&
		r.CloseTime.Equal(o.CloseTime) &&
		AttributesEqual(r.Attributes, o.Attributes)
}

// AttributesEqual reports whether two sorted attribute lists hold the same values.
func AttributesEqual(a, b []Attribute) bool {
	return slices.EqualFunc(a, b, func(a, b Attribute) bool {
		return a.Name == b.Name && a.Type == b.Type && a.Str == b.Str && a.Int == b.Int &&
			a.Double == b.Double && slices.Equal(a.List, b.List)
	})
}

// DatetimeString is how a Datetime value is stored and compared: fixed-width UTC RFC3339 with
// nine fractional digits, so that byte order is time order over every year RFC3339 can write
// (a count of nanoseconds would not reach past 2262).
func DatetimeString(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000000Z")
}

// Words splits text into the lower-case words a Text attribute is matched by: runs of letters
// and digits (any non-ASCII rune but a space counts as a letter).
func Words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && r != ' ')
	})
}

// DecodeValue reads a search attribute value of type t: a string (Keyword, Text), []string
// (KeywordList), int64 (Int), float64 (Double), bool (Bool) or time.Time (Datetime). A null
// value (no data, the binary/null encoding, or JSON null) is nil without an error.
func DecodeValue(p *commonpb.Payload, t enumspb.IndexedValueType) (any, error) {
	data := p.GetData()
	if len(data) == 0 || string(p.GetMetadata()["encoding"]) == "binary/null" || string(data) == "null" {
		return nil, nil
	}
	if enc := string(p.GetMetadata()["encoding"]); enc != "" && enc != "json/plain" {
		return nil, fmt.Errorf("encoding %q is not json/plain", enc)
	}
	var err error
	switch t {
	case enumspb.INDEXED_VALUE_TYPE_KEYWORD, enumspb.INDEXED_VALUE_TYPE_TEXT:
		var s string
		if err = json.Unmarshal(data, &s); err == nil {
			return s, nil
		}
	case enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST:
		var l []string
		if err = json.Unmarshal(data, &l); err == nil {
			return l, nil
		}
	case enumspb.INDEXED_VALUE_TYPE_INT:
		var n int64
		if err = json.Unmarshal(data, &n); err == nil {
			return n, nil
		}
	case enumspb.INDEXED_VALUE_TYPE_DOUBLE:
		var f float64
		if err = json.Unmarshal(data, &f); err == nil {
			return f, nil
		}
	case enumspb.INDEXED_VALUE_TYPE_BOOL:
		var b bool
		if err = json.Unmarshal(data, &b); err == nil {
			return b, nil
		}
	case enumspb.INDEXED_VALUE_TYPE_DATETIME:
		var s string
		if err = json.Unmarshal(data, &s); err == nil {
			var tm time.Time
			if tm, err = time.Parse(time.RFC3339Nano, s); err == nil {
				return tm, nil
			}
		}
	default:
		return nil, fmt.Errorf("unknown type %s", t)
	}
	return nil, fmt.Errorf("%.100s does not decode: %v", data, err)
}

// AttributesOf types stored search attributes by the type each value was stamped with when it
// was stored (its payload's "type" metadata). A value without a known stamp, that does not
// decode as it, null, or holding a NUL character is left out: queries see it as unset.
func AttributesOf(sa *commonpb.SearchAttributes) []Attribute {
	fields := sa.GetIndexedFields()
	if len(fields) == 0 {
		return nil
	}
	out := make([]Attribute, 0, len(fields))
	for name, p := range fields {
		// The frontend stamps the enum's name; SDKs stamp the short one ("Keyword").
		t, err := enumspb.IndexedValueTypeFromString(string(p.GetMetadata()["type"]))
		if err != nil || t == enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED {
			continue
		}
		v, err := DecodeValue(p, t)
		if err != nil || v == nil || holdsNUL(v) {
			continue
		}
		a := Attribute{Name: name, Type: t}
		switch v := v.(type) {
		case string:
			a.Str = v
			if t == enumspb.INDEXED_VALUE_TYPE_TEXT {
				a.List = distinct(Words(v))
			}
		case []string:
			a.List = distinct(v)
		case int64:
			a.Int = v
		case float64:
			a.Double = v
		case bool:
			if v {
				a.Int = 1
			}
		case time.Time:
			a.Str = DatetimeString(v)
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Attribute) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// holdsNUL reports whether a decoded value holds a NUL character, which PostgreSQL cannot store
// in text: such a value is left out on every backend alike.
func holdsNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.IndexByte(v, 0) >= 0
	case []string:
		return slices.ContainsFunc(v, func(s string) bool { return strings.IndexByte(s, 0) >= 0 })
	}
	return false
}

func distinct(l []string) []string {
	if len(l) == 0 {
		return nil
	}
	l = slices.Clone(l)
	slices.Sort(l)
	return slices.Compact(l)
}
