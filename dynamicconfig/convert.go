package dynamicconfig

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Values arrive as whatever the client decoded: YAML gives int, float64, bool, string; JSON flags
// give json.Number, bool, string; tests pass Go values. Each converter accepts the forms a person
// would reasonably write and nothing else.

func convertInt(v any) (int, error) {
	switch x := v.(type) {
	case int:
		return x, nil
	case int8:
		return int(x), nil
	case int16:
		return int(x), nil
	case int32:
		return int(x), nil
	case int64:
		return int(x), nil
	case uint8:
		return int(x), nil
	case uint16:
		return int(x), nil
	case uint32:
		return int(x), nil
	case uint:
		if x > math.MaxInt {
			return 0, fmt.Errorf("%d overflows int", x)
		}
		return int(x), nil
	case uint64:
		if x > math.MaxInt {
			return 0, fmt.Errorf("%d overflows int", x)
		}
		return int(x), nil
	case float32:
		return floatToInt(float64(x))
	case float64:
		return floatToInt(x)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return int(i), nil
		}
		f, err := x.Float64()
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", x.String())
		}
		return floatToInt(f)
	default:
		return 0, fmt.Errorf("want an integer, got %T", v)
	}
}

func floatToInt(f float64) (int, error) {
	// 2^63 is exactly representable; anything at or beyond it does not fit.
	if f != math.Trunc(f) || f >= math.MaxInt64 || f < math.MinInt64 {
		return 0, fmt.Errorf("%v is not a whole number that fits an int", f)
	}
	return int(f), nil
}

func convertFloat(v any) (float64, error) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case float32:
		f = float64(x)
	case json.Number:
		var err error
		if f, err = x.Float64(); err != nil {
			return 0, fmt.Errorf("%q is not a number", x.String())
		}
	default:
		i, err := convertInt(v)
		if err != nil {
			return 0, fmt.Errorf("want a number, got %T", v)
		}
		f = float64(i)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%v is not a finite number", f)
	}
	return f, nil
}

func convertBool(v any) (bool, error) {
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("want true or false, got %T", v)
	}
	return b, nil
}

func convertString(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("want a string, got %T", v)
	}
	return s, nil
}

// convertDuration accepts a Go duration string ("90s", "1h30m"), or a number of seconds, bare
// or as a string ("90"). Negative durations are rejected: no setting means anything by them, and
// a sign typo should not, say, expire every lease at once.
func convertDuration(v any) (time.Duration, error) {
	var d time.Duration
	switch x := v.(type) {
	case time.Duration:
		d = x
	case string:
		s := strings.TrimSpace(x)
		if secs, err := strconv.ParseFloat(s, 64); err == nil {
			return secondsToDuration(secs)
		}
		parsed, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%q is neither a duration (e.g. 90s, 5m, 1h30m) nor a number of seconds", x)
		}
		d = parsed
	default:
		secs, err := convertFloat(v)
		if err != nil {
			return 0, fmt.Errorf("want a duration (e.g. 90s) or a number of seconds, got %T", v)
		}
		return secondsToDuration(secs)
	}
	if d < 0 {
		return 0, fmt.Errorf("negative duration %v", d)
	}
	return d, nil
}

func secondsToDuration(secs float64) (time.Duration, error) {
	if math.IsNaN(secs) || secs < 0 || secs*float64(time.Second) >= math.MaxInt64 {
		return 0, fmt.Errorf("%v seconds is not a usable duration", secs)
	}
	return time.Duration(secs * float64(time.Second)), nil
}
