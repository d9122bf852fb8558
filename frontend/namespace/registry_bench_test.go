package namespace

import (
	"context"
	"testing"
)

// BenchmarkGetByName is the lookup every call makes (the static and the stored registry: a
// stored one reads its published snapshot, never the store, for a known name).
func BenchmarkGetByName(b *testing.B) {
	stored, err := NewStoredRegistry([]Config{{Name: "orders"}}, NewMemoryStore(), StoreOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if err := stored.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stored.Stop)
	for name, r := range map[string]*Registry{"Static": MustNewRegistry(Config{Name: "orders"}), "Stored": stored} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := r.GetByName("orders"); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
