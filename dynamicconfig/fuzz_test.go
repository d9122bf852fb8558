package dynamicconfig

import (
	"testing"
)

// FuzzParseFile checks that any file content parses or fails with an error, never a panic, and
// that what parses has one entry per case-insensitive key, each with at least one value.
// `go test` runs only the seeds; fuzz with `go test -fuzz FuzzParseFile ./dynamicconfig`.
func FuzzParseFile(f *testing.F) {
	for _, seed := range []string{
		"",
		"matching.InactiveWorkerCleanupDelay:\n  - value: 5m\n    constraints: {namespace: staging}\n  - value: 1h\n",
		"worker.leaseIntervalMultiplier:\n  - value: 3\n",
		"a: b",
		"x:\n  - constraints: {namespace: ''}\n",
		"K:\n  - value: 1\nk:\n  - value: 2\n",
		"[",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		keys, err := parseFile(content)
		if err != nil {
			return
		}
		for norm, k := range keys {
			if Key(k.key).normalized() != norm {
				t.Fatalf("key %q is filed under %q", k.key, norm)
			}
		}
	})
}
