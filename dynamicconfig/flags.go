package dynamicconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ParseKeyValueFlags parses repeated --dynamic-config-value flags of the form KEY=JSON into a
// MemoryClient (layer it over the file with NewOverlayClient). The value is a JSON scalar:
//
//	--dynamic-config-value worker.maxBindingsPerWorker=5000
//	--dynamic-config-value 'matching.InactiveWorkerCleanupDelay="5m"'
//	--dynamic-config-value frontend.namespaceRPS=2500.5
//
// Strings keep their JSON quotes on the command line and are converted when the setting is read,
// like file values. When a key is given twice, the later flag wins.
func ParseKeyValueFlags(flags []string) (*MemoryClient, error) {
	client := NewMemoryClient()
	for _, flag := range flags {
		key, value, err := parseKeyValueFlag(flag)
		if err != nil {
			return nil, err
		}
		client.OverrideValue(key, value)
	}
	return client, nil
}

func parseKeyValueFlag(flag string) (Key, any, error) {
	rawKey, rawValue, ok := strings.Cut(flag, "=")
	if !ok {
		return "", nil, fmt.Errorf("dynamic config flag %s: want KEY=JSON, e.g. worker.maxBindingsPerWorker=5000", flag)
	}
	key := strings.TrimSpace(rawKey)
	if key == "" || strings.ContainsAny(key, " \t\n") {
		return "", nil, fmt.Errorf("dynamic config flag %s: invalid key %q", flag, rawKey)
	}

	dec := json.NewDecoder(strings.NewReader(rawValue))
	// Numbers stay exact (an int64 beyond 2^53 would not survive float64); converters read
	// json.Number.
	dec.UseNumber()
	var value any
	err := dec.Decode(&value)
	if err == nil && dec.More() {
		err = errors.New("extra data after the value")
	}
	if err != nil {
		hint := ""
		if trimmed := strings.TrimSpace(rawValue); trimmed != "" && !strings.HasPrefix(trimmed, `"`) {
			hint = fmt.Sprintf(` (strings must be JSON-quoted: %s='"%s"')`, key, trimmed)
		}
		return "", nil, fmt.Errorf("dynamic config flag %s: value %q is not valid JSON%s: %w", flag, rawValue, hint, err)
	}
	switch value.(type) {
	case string, bool, json.Number:
	default:
		return "", nil, fmt.Errorf("dynamic config flag %s: value must be a JSON number, string or boolean, got %s", flag, describeJSON(rawValue))
	}
	return Key(key), value, nil
}

func describeJSON(raw string) string {
	switch b := bytes.TrimSpace([]byte(raw)); {
	case len(b) == 0:
		return "nothing"
	case b[0] == '{':
		return "an object"
	case b[0] == '[':
		return "an array"
	case string(b) == "null":
		return "null"
	default:
		return raw
	}
}
