package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoadConfig checks that any static config file loads or fails with an error naming the
// file, never a panic, and that what loads takes its defaults without a panic.
// `go test` runs only the seeds; fuzz with `go test -fuzz FuzzLoadConfig ./server`.
func FuzzLoadConfig(f *testing.F) {
	sample, err := os.ReadFile("../config/server.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sample)
	f.Add([]byte(""))
	f.Add([]byte("history:\n  numShards: -3\n"))
	f.Add([]byte("frontend: [1, 2]\n"))
	f.Add([]byte("namespaces:\n  - name: a\n  - name: a\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content []byte) {
		path := filepath.Join(dir, "vigil.yaml")
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := LoadConfig(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("LoadConfig error does not name the file: %v", err)
			}
			return
		}
		_ = cfg.withDefaults()
	})
}
