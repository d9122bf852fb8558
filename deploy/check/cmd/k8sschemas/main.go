// Command k8sschemas writes JSON Schemas of Kubernetes kinds in the layout kubeconform reads
// (-schema-location 'DIR/{{.ResourceKind}}{{.KindSuffix}}.json'), made from the OpenAPI v3
// documents that k8s.io/client-go ships in its openapitest package: the core (v1), apps/v1,
// batch/v1 and discovery.k8s.io/v1 kinds of the Kubernetes release that client-go follows.
// Nothing is downloaded at run time.
//
//	go run ./cmd/k8sschemas DIR
//
// The schemas are strict, as kubeconform's -strict expects of its default schemas: an object
// with declared properties admits no others (unless it preserves unknown fields).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/client-go/openapi/openapitest"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: k8sschemas DIR")
		os.Exit(2)
	}
	n, err := write(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8sschemas:", err)
		os.Exit(1)
	}
	fmt.Printf("k8sschemas: %d schemas in %s\n", n, os.Args[1])
}

type gvk struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

func write(dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	paths, err := openapitest.NewEmbeddedFileClient().Paths()
	if err != nil {
		return 0, err
	}
	names := make([]string, 0, len(paths))
	for p := range paths {
		names = append(names, p)
	}
	sort.Strings(names)
	written := 0
	for _, p := range names {
		raw, err := paths[p].Schema("application/json")
		if err != nil {
			return 0, fmt.Errorf("%s: %w", p, err)
		}
		var doc struct {
			Components struct {
				Schemas map[string]map[string]any `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			return 0, fmt.Errorf("%s: %w", p, err)
		}
		schemas := doc.Components.Schemas
		for _, s := range schemas {
			strict(s)
		}
		for name, s := range schemas {
			kinds, err := kindsOf(s)
			if err != nil {
				return 0, fmt.Errorf("%s: %s: %w", p, name, err)
			}
			for _, k := range kinds {
				if strings.HasSuffix(k.Kind, "List") || k.Version == "" {
					continue
				}
				out := map[string]any{
					"$schema":    "http://json-schema.org/draft-07/schema#",
					"$ref":       "#/components/schemas/" + name,
					"components": map[string]any{"schemas": schemas},
				}
				b, err := json.Marshal(out)
				if err != nil {
					return 0, err
				}
				if err := os.WriteFile(filepath.Join(dir, fileName(k)), b, 0o644); err != nil {
					return 0, err
				}
				written++
			}
		}
	}
	return written, nil
}

// fileName is kubeconform's {{.ResourceKind}}{{.KindSuffix}}.json: the lower-case kind, then
// the group's first label (none for the core group) and the version.
func fileName(k gvk) string {
	suffix := "-" + k.Version
	if k.Group != "" {
		suffix = "-" + strings.Split(k.Group, ".")[0] + suffix
	}
	return strings.ToLower(k.Kind) + suffix + ".json"
}

func kindsOf(s map[string]any) ([]gvk, error) {
	v, ok := s["x-kubernetes-group-version-kind"]
	if !ok {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out []gvk
	return out, json.Unmarshal(b, &out)
}

// strict closes every object schema that declares its properties, as kubeconform's strict
// schemas do, so that a misspelt or misplaced field is an error.
func strict(v any) {
	switch s := v.(type) {
	case map[string]any:
		if _, ok := s["properties"]; ok {
			_, has := s["additionalProperties"]
			if preserve, _ := s["x-kubernetes-preserve-unknown-fields"].(bool); !has && !preserve {
				s["additionalProperties"] = false
			}
		}
		for _, c := range s {
			strict(c)
		}
	case []any:
		for _, c := range s {
			strict(c)
		}
	}
}
