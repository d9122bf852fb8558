package dynamicconfig

import (
	"slices"
	"sync"
)

// MemoryClient holds values set by code; it is the client tests use.
// It is safe for concurrent use.
type MemoryClient struct {
	mu     sync.RWMutex
	nextID uint64
	// values holds each key's values newest first, so that a later override wins over an
	// earlier one with the same constraints.
	values map[string][]memoryValue
	// views is what GetValue returns for each key of values, made when the key's values
	// change rather than on every read.
	views map[string][]ConstrainedValue
}

type memoryValue struct {
	id uint64
	ConstrainedValue
}

// NewMemoryClient returns an empty MemoryClient.
func NewMemoryClient() *MemoryClient {
	return &MemoryClient{values: make(map[string][]memoryValue), views: make(map[string][]ConstrainedValue)}
}

// GetValue implements Client.
func (m *MemoryClient) GetValue(key Key) []ConstrainedValue {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.views[key.normalized()]
}

// updateView remakes k's view after its values changed. m.mu is held.
func (m *MemoryClient) updateView(k string) {
	stored := m.values[k]
	if len(stored) == 0 {
		delete(m.views, k)
		return
	}
	view := make([]ConstrainedValue, len(stored))
	for i, v := range stored {
		view[i] = v.ConstrainedValue
	}
	m.views[k] = view
}

// OverrideValue sets key to value for every namespace. The returned cleanup removes exactly this
// override (use it with t.Cleanup).
func (m *MemoryClient) OverrideValue(key Key, value any) (cleanup func()) {
	return m.add(key, ConstrainedValue{Value: value})
}

// OverrideNamespaceValue sets key to value for the namespace with this NAME only. The returned
// cleanup removes exactly this override.
func (m *MemoryClient) OverrideNamespaceValue(key Key, namespace string, value any) (cleanup func()) {
	return m.add(key, ConstrainedValue{Constraints: Constraints{Namespace: namespace}, Value: value})
}

func (m *MemoryClient) add(key Key, cv ConstrainedValue) func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nextID++
	id := m.nextID
	k := key.normalized()
	m.values[k] = slices.Insert(m.values[k], 0, memoryValue{id: id, ConstrainedValue: cv})
	m.updateView(k)
	return func() { m.remove(k, id) }
}

func (m *MemoryClient) remove(k string, id uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.values[k] = slices.DeleteFunc(m.values[k], func(v memoryValue) bool { return v.id == id })
	if len(m.values[k]) == 0 {
		delete(m.values, k)
	}
	m.updateView(k)
}
