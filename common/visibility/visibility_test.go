package visibility

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
)

func payload(typ, data string) *commonpb.Payload {
	return &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain"), "type": []byte(typ)}, Data: []byte(data)}
}

func TestAttributesOfTypesByStamp(t *testing.T) {
	t.Parallel()
	due := time.Date(9999, 12, 31, 23, 59, 59, 5, time.FixedZone("x", 3600))
	attrs := AttributesOf(&commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
		"Amount":  payload("INDEXED_VALUE_TYPE_INT", "42"),
		"Score":   payload("Double", "1.5"), // the SDKs' short name
		"Vip":     payload("INDEXED_VALUE_TYPE_BOOL", "true"),
		"Due":     payload("INDEXED_VALUE_TYPE_DATETIME", `"`+due.Format(time.RFC3339Nano)+`"`),
		"Tags":    payload("INDEXED_VALUE_TYPE_KEYWORD_LIST", `["b","a","b"]`),
		"Notes":   payload("INDEXED_VALUE_TYPE_TEXT", `"Rush ORDER, rush"`),
		"Who":     payload("INDEXED_VALUE_TYPE_KEYWORD", `"c-1"`),
		"Null":    payload("INDEXED_VALUE_TYPE_KEYWORD", `null`),
		"NUL":     payload("INDEXED_VALUE_TYPE_KEYWORD", `"a\u0000b"`),
		"Bad":     payload("INDEXED_VALUE_TYPE_INT", `"x"`),
		"Unknown": payload("", `"x"`),
	}})
	require.Equal(t, []Attribute{
		{Name: "Amount", Type: enumspb.INDEXED_VALUE_TYPE_INT, Int: 42},
		{Name: "Due", Type: enumspb.INDEXED_VALUE_TYPE_DATETIME, Str: "9999-12-31T22:59:59.000000005Z"},
		{Name: "Notes", Type: enumspb.INDEXED_VALUE_TYPE_TEXT, Str: "Rush ORDER, rush", List: []string{"order", "rush"}},
		{Name: "Score", Type: enumspb.INDEXED_VALUE_TYPE_DOUBLE, Double: 1.5},
		{Name: "Tags", Type: enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST, List: []string{"a", "b"}},
		{Name: "Vip", Type: enumspb.INDEXED_VALUE_TYPE_BOOL, Int: 1},
		{Name: "Who", Type: enumspb.INDEXED_VALUE_TYPE_KEYWORD, Str: "c-1"},
	}, attrs)
	require.Nil(t, AttributesOf(nil))
}

func TestDatetimeStringOrdersAsTime(t *testing.T) {
	t.Parallel()
	times := []time.Time{
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 3, 1, 12, 0, 0, 1, time.UTC),
		time.Date(2026, 3, 1, 12, 0, 0, 10, time.UTC),
		time.Date(2262, 4, 12, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for i := 1; i < len(times); i++ {
		require.Less(t, DatetimeString(times[i-1]), DatetimeString(times[i]))
	}
}

func TestTimeNanos(t *testing.T) {
	t.Parallel()
	require.EqualValues(t, Unknown, TimeNanos(time.Time{}))
	require.EqualValues(t, math.MinInt64, BoundNanos(time.Time{}), "a literal year 1 is before every stored time")
	require.EqualValues(t, math.MaxInt64-1, BoundNanos(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)))
	tm := time.Date(2026, 3, 1, 12, 0, 0, 7, time.UTC)
	require.Equal(t, tm.UnixNano(), TimeNanos(tm))
	r := &Record{StartTime: tm}
	require.EqualValues(t, Unknown, r.DurationNanos())
	r.CloseTime = tm.Add(time.Second)
	require.EqualValues(t, time.Second, r.DurationNanos())
}

func TestRecordEqual(t *testing.T) {
	t.Parallel()
	a := &Record{TypeName: "T", Status: 1, Attributes: []Attribute{{Name: "A", Type: enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST, List: []string{"x"}}}}
	b := &Record{TypeName: "T", Status: 1, Attributes: []Attribute{{Name: "A", Type: enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST, List: []string{"x"}}}}
	require.True(t, a.Equal(b))
	b.Attributes[0].List = []string{"y"}
	require.False(t, a.Equal(b))
	require.False(t, a.Equal(nil))
	require.True(t, (*Record)(nil).Equal(nil))
}

func TestDecodeQueryChecksTheShape(t *testing.T) {
	t.Parallel()
	good := &Query{Where: &Expr{Op: OpAnd, Args: []*Expr{
		{Op: OpCompare, Cmp: ">=", Field: Field{Attr: "Amount", Type: enumspb.INDEXED_VALUE_TYPE_INT}, Values: []Value{{I: 3}}},
		{Op: OpNull, Field: Field{Attr: "Tags", Type: enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST}, Not: true},
		{Op: OpWords, Field: Field{Attr: "Notes", Type: enumspb.INDEXED_VALUE_TYPE_TEXT}},
	}}, OrderBy: []Order{{Field: Field{Column: ColumnStartTime}, Desc: true}}}
	got, err := DecodeQuery(good.Encode())
	require.NoError(t, err)
	require.Equal(t, good, got)

	for name, q := range map[string]string{
		"not JSON":               `{`,
		"unknown op":             `{"w":{"op":"like","f":{"c":"TaskQueue"},"v":[{"s":"x"}]}}`,
		"unknown column":         `{"w":{"op":"cmp","c":"=","f":{"c":"Nope"},"v":[{"s":"x"}]}}`,
		"bad comparison":         `{"w":{"op":"cmp","c":"~","f":{"c":"TaskQueue"},"v":[{"s":"x"}]}}`,
		"between one value":      `{"w":{"op":"between","f":{"c":"StartTime"},"v":[{"i":1}]}}`,
		"IN without values":      `{"w":{"op":"in","f":{"c":"TaskQueue"}}}`,
		"empty OR":               `{"w":{"op":"or"}}`,
		"attribute without type": `{"w":{"op":"null","f":{"a":"X"}}}`,
		"column and attribute":   `{"w":{"op":"null","f":{"c":"TaskQueue","a":"X","t":2}}}`,
		"contains on a keyword":  `{"w":{"op":"contains","f":{"a":"X","t":2},"v":[{"s":"x"}]}}`,
		"compare on a list":      `{"w":{"op":"cmp","c":"=","f":{"a":"X","t":7},"v":[{"s":"x"}]}}`,
		"order by text":          `{"o":[{"f":{"a":"X","t":1}}]}`,
	} {
		_, err := DecodeQuery([]byte(q))
		require.Error(t, err, name)
	}
}
