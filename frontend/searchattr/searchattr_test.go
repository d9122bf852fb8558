package searchattr

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/serviceerror"
)

func jsonPayload(data string, typ string) *commonpb.Payload {
	md := map[string][]byte{"encoding": []byte("json/plain")}
	if typ != "" {
		md["type"] = []byte(typ)
	}
	return &commonpb.Payload{Metadata: md, Data: []byte(data)}
}

var registered = map[string]enumspb.IndexedValueType{
	"CustomerId": enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"Notes":      enumspb.INDEXED_VALUE_TYPE_TEXT,
	"Amount":     enumspb.INDEXED_VALUE_TYPE_INT,
	"Ratio":      enumspb.INDEXED_VALUE_TYPE_DOUBLE,
	"Urgent":     enumspb.INDEXED_VALUE_TYPE_BOOL,
	"DueAt":      enumspb.INDEXED_VALUE_TYPE_DATETIME,
	"Tags":       enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		fields map[string]*commonpb.Payload
		err    string // "" = valid
		want   map[string]any
	}{
		{name: "Empty"},
		{name: "EveryType", fields: map[string]*commonpb.Payload{
			"CustomerId": jsonPayload(`"c-1"`, "Keyword"),
			"Notes":      jsonPayload(`"some words"`, "Text"),
			"Amount":     jsonPayload(`42`, "Int"),
			"Ratio":      jsonPayload(`0.25`, "Double"),
			"Urgent":     jsonPayload(`true`, "Bool"),
			"DueAt":      jsonPayload(`"2026-03-01T10:00:00.5Z"`, "Datetime"),
			"Tags":       jsonPayload(`["a","b"]`, "KeywordList"),
		}, want: map[string]any{
			"CustomerId": "c-1", "Notes": "some words", "Amount": int64(42), "Ratio": 0.25, "Urgent": true,
			"DueAt": time.Date(2026, 3, 1, 10, 0, 0, 5e8, time.UTC), "Tags": []string{"a", "b"},
		}},
		{name: "UntypedPayloadsTakeTheRegisteredType", fields: map[string]*commonpb.Payload{
			"Amount": jsonPayload(`7`, ""),
		}, want: map[string]any{"Amount": int64(7)}},
		{name: "NullIsUnset", fields: map[string]*commonpb.Payload{
			"Amount": jsonPayload(`null`, "Int"), "CustomerId": jsonPayload(`"x"`, ""),
		}, want: map[string]any{"CustomerId": "x"}},
		{name: "Unknown", fields: map[string]*commonpb.Payload{"Nope": jsonPayload(`"x"`, "Keyword")},
			err: "search attribute Nope is not defined"},
		{name: "OtherCaseIsUnknown", fields: map[string]*commonpb.Payload{"amount": jsonPayload(`1`, "Int")},
			err: "search attribute amount is not defined"},
		{name: "System", fields: map[string]*commonpb.Payload{"ActivityId": jsonPayload(`"x"`, "Keyword")},
			err: "ActivityId attribute can't be set in SearchAttributes"},
		{name: "StringForInt", fields: map[string]*commonpb.Payload{"Amount": jsonPayload(`"ten"`, "Keyword")},
			err: "invalid value for search attribute Amount of type Int"},
		{name: "FloatForInt", fields: map[string]*commonpb.Payload{"Amount": jsonPayload(`1.5`, "Double")},
			err: "invalid value for search attribute Amount of type Int"},
		{name: "ListForKeyword", fields: map[string]*commonpb.Payload{"CustomerId": jsonPayload(`["a"]`, "KeywordList")},
			err: "invalid value for search attribute CustomerId of type Keyword"},
		{name: "BadTime", fields: map[string]*commonpb.Payload{"DueAt": jsonPayload(`"tomorrow"`, "Datetime")},
			err: "invalid value for search attribute DueAt of type Datetime"},
		{name: "NotJSON", fields: map[string]*commonpb.Payload{"Urgent": {Metadata: map[string][]byte{"encoding": []byte("binary/plain")}, Data: []byte{1}}},
			err: "invalid value for search attribute Urgent of type Bool"},
		{name: "ValueTooLarge", fields: map[string]*commonpb.Payload{"Notes": jsonPayload(`"`+strings.Repeat("x", MaxValueSize)+`"`, "Text")},
			err: "search attribute Notes value size 2050 exceeds size limit 2048"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Validate(&commonpb.SearchAttributes{IndexedFields: tc.fields}, registered)
			if tc.err != "" {
				var invalid *serviceerror.InvalidArgument
				require.ErrorAs(t, err, &invalid)
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			if len(tc.want) == 0 {
				require.Nil(t, got)
				return
			}
			require.Len(t, got.GetIndexedFields(), len(tc.want))
			for name, want := range tc.want {
				p := got.GetIndexedFields()[name]
				require.Equal(t, registered[name].String(), string(p.GetMetadata()["type"]), "stamped with the registered type")
				v, err := Decode(p, registered[name])
				require.NoError(t, err)
				require.Equal(t, want, v, name)
			}
		})
	}

	t.Run("TooMany", func(t *testing.T) {
		fields := map[string]*commonpb.Payload{}
		many := map[string]enumspb.IndexedValueType{}
		for i := range MaxKeys + 1 {
			name := "A" + strings.Repeat("x", i)
			fields[name] = jsonPayload(`1`, "")
			many[name] = enumspb.INDEXED_VALUE_TYPE_INT
		}
		_, err := Validate(&commonpb.SearchAttributes{IndexedFields: fields}, many)
		require.ErrorContains(t, err, "number of search attributes 101 exceeds limit 100")
	})
	t.Run("TotalTooLarge", func(t *testing.T) {
		fields := map[string]*commonpb.Payload{}
		many := map[string]enumspb.IndexedValueType{}
		for i := range 25 {
			name := "T" + strings.Repeat("x", i)
			fields[name] = jsonPayload(`"`+strings.Repeat("y", 1900)+`"`, "")
			many[name] = enumspb.INDEXED_VALUE_TYPE_TEXT
		}
		_, err := Validate(&commonpb.SearchAttributes{IndexedFields: fields}, many)
		require.ErrorContains(t, err, "total size of search attributes")
	})
}

func TestValidateName(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{
		"CustomerId": true, "_private": true, "a1_b2": true,
		"": false, "1st": false, "has space": false, "dash-ed": false, strings.Repeat("a", MaxNameLength+1): false,
		"ActivityId": false, "activityid": false, "ExecutionStatus": false, "WorkflowId": false,
		"TemporalChangeVersion": false, "temporalAnything": false, "Status": false,
	} {
		err := ValidateName(name)
		if ok {
			require.NoError(t, err, name)
		} else {
			require.Error(t, err, name)
		}
	}
	require.Error(t, ValidateType("x", enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED))
	require.Error(t, ValidateType("x", 99))
	require.NoError(t, ValidateType("x", enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST))
}

func TestValidateUserMetadata(t *testing.T) {
	t.Parallel()
	require.NoError(t, ValidateUserMetadata(nil))
	require.NoError(t, ValidateUserMetadata(&sdkpb.UserMetadata{Summary: jsonPayload(`"short"`, "")}))
	err := ValidateUserMetadata(&sdkpb.UserMetadata{Summary: jsonPayload(strings.Repeat("x", MaxSummarySize+1), "")})
	require.ErrorContains(t, err, "user_metadata.summary is 401 bytes")
	err = ValidateUserMetadata(&sdkpb.UserMetadata{Details: jsonPayload(strings.Repeat("x", MaxDetailsSize+1), "")})
	require.ErrorContains(t, err, "user_metadata.details")
}
