package dynamicconfig

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConvertDuration(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		in      any
		want    time.Duration
		wantErr bool
	}{
		{name: "GoDurationSeconds", in: "90s", want: 90 * time.Second},
		{name: "GoDurationMinutes", in: "5m", want: 5 * time.Minute},
		{name: "GoDurationCompound", in: "1h30m", want: 90 * time.Minute},
		{name: "GoDurationMilliseconds", in: "100ms", want: 100 * time.Millisecond},
		{name: "BareIntIsSeconds", in: 90, want: 90 * time.Second},
		{name: "BareFloatIsSeconds", in: 1.5, want: 1500 * time.Millisecond},
		{name: "NumericStringIsSeconds", in: "30", want: 30 * time.Second},
		{name: "JSONNumberIsSeconds", in: json.Number("2"), want: 2 * time.Second},
		{name: "DurationValue", in: 3 * time.Second, want: 3 * time.Second},
		{name: "Zero", in: 0, want: 0},
		{name: "RejectsGarbage", in: "soon", wantErr: true},
		{name: "RejectsNegative", in: "-5s", wantErr: true},
		{name: "RejectsNegativeSeconds", in: -1, wantErr: true},
		{name: "RejectsBool", in: true, wantErr: true},
		{name: "RejectsNil", in: nil, wantErr: true},
		{name: "RejectsOverflow", in: 1e12, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := convertDuration(tt.in)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestConvertInt(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		in      any
		want    int
		wantErr bool
	}{
		{name: "Int", in: 5, want: 5},
		{name: "Int64", in: int64(1 << 40), want: 1 << 40},
		{name: "Uint64", in: uint64(3), want: 3},
		{name: "WholeFloat", in: 100000.0, want: 100000},
		{name: "JSONInt", in: json.Number("9007199254740993"), want: 9007199254740993},
		{name: "JSONWholeFloat", in: json.Number("1e3"), want: 1000},
		{name: "RejectsFraction", in: 1.5, wantErr: true},
		{name: "RejectsString", in: "5", wantErr: true},
		{name: "RejectsHugeFloat", in: 1e30, wantErr: true},
		{name: "RejectsHugeUint", in: uint64(math.MaxUint64), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := convertInt(tt.in)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestConvertFloatBoolString(t *testing.T) {
	t.Parallel()

	t.Run("FloatAcceptsIntsAndFloats", func(t *testing.T) {
		t.Parallel()
		for in, want := range map[any]float64{10000: 10000, 2.5: 2.5, json.Number("0.25"): 0.25} {
			got, err := convertFloat(in)
			require.NoError(t, err)
			require.InDelta(t, want, got, 0)
		}
	})
	t.Run("FloatRejectsNaNAndStrings", func(t *testing.T) {
		t.Parallel()
		_, err := convertFloat(math.NaN())
		require.Error(t, err)
		_, err = convertFloat("1")
		require.Error(t, err)
	})
	t.Run("BoolAcceptsOnlyBools", func(t *testing.T) {
		t.Parallel()
		got, err := convertBool(true)
		require.NoError(t, err)
		require.True(t, got)
		_, err = convertBool("true")
		require.Error(t, err)
	})
	t.Run("StringAcceptsOnlyStrings", func(t *testing.T) {
		t.Parallel()
		got, err := convertString("x")
		require.NoError(t, err)
		require.Equal(t, "x", got)
		_, err = convertString(5)
		require.Error(t, err)
	})
}
