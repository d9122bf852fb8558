package namespace

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// MemoryStore is a Store in memory, for tests and for registries that share one process.
type MemoryStore struct {
	mu   sync.Mutex
	rows map[string]StoredNamespace
	fail error
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{rows: make(map[string]StoredNamespace)} }

// Create implements Store.
func (m *MemoryStore) Create(_ context.Context, ns StoredNamespace) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	for _, r := range m.rows {
		if r.Name == ns.Name || r.ID == ns.ID {
			return fmt.Errorf("%w: %q", ErrAlreadyExists, ns.Name)
		}
	}
	ns.Version = 1
	m.rows[ns.Name] = ns
	return nil
}

// Update implements Store.
func (m *MemoryStore) Update(_ context.Context, ns StoredNamespace) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	r, ok := m.rows[ns.Name]
	switch {
	case !ok:
		return fmt.Errorf("%w: %q", ErrNotFound, ns.Name)
	case r.Version != ns.Version-1:
		return fmt.Errorf("%w: %q", ErrVersionConflict, ns.Name)
	}
	r.Data, r.Version, r.UpdateTime = ns.Data, ns.Version, ns.UpdateTime
	m.rows[ns.Name] = r
	return nil
}

// Get implements Store.
func (m *MemoryStore) Get(_ context.Context, name string) (StoredNamespace, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return StoredNamespace{}, m.fail
	}
	r, ok := m.rows[name]
	if !ok {
		return StoredNamespace{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return r, nil
}

// List implements Store.
func (m *MemoryStore) List(context.Context) ([]StoredNamespace, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, m.fail
	}
	out := make([]StoredNamespace, 0, len(m.rows))
	for _, r := range m.rows {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b StoredNamespace) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Rename implements Store.
func (m *MemoryStore) Rename(_ context.Context, from string, ns StoredNamespace) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	r, ok := m.rows[from]
	switch {
	case !ok:
		return fmt.Errorf("%w: %q", ErrNotFound, from)
	case r.Version != ns.Version-1:
		return fmt.Errorf("%w: %q", ErrVersionConflict, from)
	}
	if _, taken := m.rows[ns.Name]; taken {
		return fmt.Errorf("%w: %q", ErrAlreadyExists, ns.Name)
	}
	delete(m.rows, from)
	r.Name, r.Data, r.Version, r.UpdateTime = ns.Name, ns.Data, ns.Version, ns.UpdateTime
	m.rows[ns.Name] = r
	return nil
}

// Delete implements Store.
func (m *MemoryStore) Delete(_ context.Context, name, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	if r, ok := m.rows[name]; ok && r.ID == id {
		delete(m.rows, name)
	}
	return nil
}

// SetFail makes every call fail with err (nil: work again).
func (m *MemoryStore) SetFail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = err
}
