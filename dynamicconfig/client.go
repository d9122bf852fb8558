// Package dynamicconfig provides typed settings that are read at the moment they are used, so an
// operator can change them without restarting the server.
//
// A setting is declared once, at package level, with its key, default and description (see
// constants.go). Code turns it into a getter through a Collection and calls the getter every time
// it needs the value:
//
//	cleanupDelay := dynamicconfig.InactiveWorkerCleanupDelay.Get(collection)
//	...
//	delay := cleanupDelay(namespaceName)
//
// Values come from a Client: a YAML file polled for changes (FileClient), command-line
// overrides (ParseKeyValueFlags, NewOverlayClient) or, in tests, a MemoryClient.
package dynamicconfig

import (
	"strings"
	"sync"
)

// Key names a setting, e.g. "matching.InactiveWorkerCleanupDelay". Keys are compared
// case-insensitively.
type Key string

// String returns the key as declared.
func (k Key) String() string { return string(k) }

// normalized is the form clients index keys by. Settings are read on every heartbeat, and the
// declared keys are camelCase, so the lowered form is remembered rather than made (and
// allocated) on each read; there are only as many keys as settings.
func (k Key) normalized() string {
	normalizedKeys.RLock()
	n, ok := normalizedKeys.m[k]
	normalizedKeys.RUnlock()
	if ok {
		return n
	}
	n = strings.ToLower(string(k))
	normalizedKeys.Lock()
	normalizedKeys.m[k] = n
	normalizedKeys.Unlock()
	return n
}

var normalizedKeys = struct {
	sync.RWMutex
	m map[Key]string
}{m: map[Key]string{}}

// Constraints restrict where a value applies. The zero value applies everywhere.
type Constraints struct {
	// Namespace is a namespace NAME (not ID). Empty means every namespace.
	Namespace string
}

// ConstrainedValue is one value of a key with the constraints under which it applies. Value is
// stored as the client read it (a YAML or JSON scalar) and converted to the setting's type when
// it is used.
type ConstrainedValue struct {
	Constraints Constraints
	Value       any
}

// Client is a source of dynamic config values.
type Client interface {
	// GetValue returns every value configured for key, matching the key case-insensitively, in
	// the client's precedence order (when two values match equally well, the earlier one wins).
	// It returns nil when the key is not configured. Callers must not modify the result.
	GetValue(key Key) []ConstrainedValue
}

// OverlayClient layers clients: for each key, the first client that has any value for it
// answers, and the clients below are not consulted for that key.
type OverlayClient struct {
	clients []Client
}

// NewOverlayClient returns a client in which overrides (e.g. command-line flags) take precedence
// over base (e.g. the file). An override replaces every value of its key in base, including
// namespace-constrained ones.
func NewOverlayClient(overrides Client, base Client) *OverlayClient {
	return &OverlayClient{clients: []Client{overrides, base}}
}

// GetValue implements Client.
func (o *OverlayClient) GetValue(key Key) []ConstrainedValue {
	for _, c := range o.clients {
		if c == nil {
			continue
		}
		if values := c.GetValue(key); len(values) > 0 {
			return values
		}
	}
	return nil
}
