package watch

import "github.com/vigilhq/vigil/common/memrelease"

// byNamespace maps a worker, by namespace ID and instance key, to a V. Nested by namespace, a
// worker costs one entry of its key and a V, with no namespace string of its own; a namespace
// whose workers are all gone is dropped, and a namespace's map is made anew once it holds a
// quarter of its peak (memrelease.ShrinkMap), so a fleet that left does not keep it sized.
type byNamespace[V any] map[string]*namespaceWorkers[V]

// namespaceWorkers are one namespace's entries, with the largest count they reached since
// their map was last made.
type namespaceWorkers[V any] struct {
	byKey map[string]V
	peak  int
}

func (m byNamespace[V]) get(namespaceID, key string) (V, bool) {
	if ns := m[namespaceID]; ns != nil {
		v, ok := ns.byKey[key]
		return v, ok
	}
	var zero V
	return zero, false
}

func (m byNamespace[V]) set(namespaceID, key string, v V) {
	ns := m[namespaceID]
	if ns == nil {
		ns = &namespaceWorkers[V]{byKey: make(map[string]V)}
		m[namespaceID] = ns
	}
	ns.byKey[key] = v
	ns.peak = max(ns.peak, len(ns.byKey))
}

func (m byNamespace[V]) remove(namespaceID, key string) {
	ns := m[namespaceID]
	if ns == nil {
		return
	}
	delete(ns.byKey, key)
	if len(ns.byKey) == 0 {
		delete(m, namespaceID)
		return
	}
	ns.byKey, _ = memrelease.ShrinkMap(ns.byKey, &ns.peak, memrelease.ShrinkMapMin)
}
