package frontend

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The check visits only the fields that can be malformed, and still finds a bad value deep in
// a recursive type (a Struct holds Values that hold Structs).
func TestWellFormedVisitsOnlyWhatCanBeMalformed(t *testing.T) {
	t.Parallel()
	require.Empty(t, checkedFields((&wrapperspb.Int64Value{}).ProtoReflect().Descriptor()), "a number cannot be malformed")
	require.Len(t, checkedFields((&structpb.Value{}).ProtoReflect().Descriptor()), 4, "null, string, struct and list values; not number or bool")

	deep, err := structpb.NewStruct(map[string]any{"a": map[string]any{"b": []any{"x"}}})
	require.NoError(t, err)
	list := deep.Fields["a"].GetStructValue().Fields["b"].GetListValue()
	list.Values = append(list.Values, &structpb.Value{Kind: &structpb.Value_NullValue{NullValue: 7}})
	err = wellFormed(deep.ProtoReflect())
	require.ErrorContains(t, err, `fields["a"].struct_value.fields["b"].list_value.values[1].null_value: 7 is not a NullValue`)

	require.ErrorContains(t, wellFormed((&durationpb.Duration{Seconds: 1, Nanos: -1}).ProtoReflect()), "is not a valid duration")
}
