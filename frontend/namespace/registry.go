// Package namespace is the frontend's registry of namespaces.
//
// vigil's namespaces come from static configuration; there is no namespace store and no
// RegisterNamespace RPC. A namespace has a name (what clients send and what dynamic config is
// keyed by) and an ID (what history keys executions and shards by).
package namespace

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"go.temporal.io/api/serviceerror"
)

// DefaultName is the namespace that always exists, as in a Temporal dev server.
const DefaultName = "default"

// MaxNameLength bounds a namespace name, as Temporal does.
const MaxNameLength = 255

// idSpace is the UUIDv5 name space vigil derives namespace IDs in. It is a constant of the
// data layout: changing it changes every derived namespace ID, so every worker would move to
// another shard and every stored execution would be orphaned.
var idSpace = uuid.MustParse("6f1c2a4e-59d3-4c1e-9d7a-8b0e2f5c3a91")

// Config declares one namespace.
type Config struct {
	// Name is what clients send in `namespace`. Required.
	Name string `yaml:"name"`
	// ID is the namespace's stable identifier. Optional: when empty it is derived from the
	// name (see DeriveID). Set it only to keep the ID of a namespace that is being renamed.
	ID string `yaml:"id"`
	// Description is shown by DescribeNamespace.
	Description string `yaml:"description"`
	// OwnerEmail is shown by DescribeNamespace.
	OwnerEmail string `yaml:"ownerEmail"`
}

// Namespace is a resolved namespace.
type Namespace struct {
	Name        string
	ID          string
	Description string
	OwnerEmail  string
}

// DeriveID returns the ID a namespace gets when its configuration names none: a UUIDv5 of the
// name. Executions are keyed and sharded by namespace ID, so the ID must be the same on every
// host and after every restart. Without a namespace store, hashing the name is the only way to
// get that: a random ID would be different on the next start and orphan everything stored.
func DeriveID(name string) string {
	return uuid.NewSHA1(idSpace, []byte(name)).String()
}

// Registry resolves namespaces by name and by ID. It is immutable and safe for concurrent use.
type Registry struct {
	byName map[string]*Namespace
	byID   map[string]*Namespace
	names  []string
}

// NewRegistry builds a registry from configuration. The default namespace is added unless
// configured. Names must be unique and valid; IDs (given or derived) must be unique.
func NewRegistry(configs []Config) (*Registry, error) {
	r := &Registry{byName: make(map[string]*Namespace), byID: make(map[string]*Namespace)}
	hasDefault := slices.ContainsFunc(configs, func(c Config) bool { return c.Name == DefaultName })
	if !hasDefault {
		configs = append([]Config{{Name: DefaultName, Description: "The default namespace."}}, configs...)
	}
	for i, c := range configs {
		if err := validateName(c.Name); err != nil {
			return nil, fmt.Errorf("namespace %d: %w", i, err)
		}
		if _, dup := r.byName[c.Name]; dup {
			return nil, fmt.Errorf("namespace %q: declared twice", c.Name)
		}
		id := c.ID
		if id == "" {
			id = DeriveID(c.Name)
		} else if _, err := uuid.Parse(id); err != nil {
			return nil, fmt.Errorf("namespace %q: id %q is not a UUID: %w", c.Name, id, err)
		}
		if other, dup := r.byID[id]; dup {
			return nil, fmt.Errorf("namespace %q: id %s is already used by namespace %q", c.Name, id, other.Name)
		}
		ns := &Namespace{Name: c.Name, ID: id, Description: c.Description, OwnerEmail: c.OwnerEmail}
		r.byName[ns.Name] = ns
		r.byID[ns.ID] = ns
		r.names = append(r.names, ns.Name)
	}
	slices.Sort(r.names)
	return r, nil
}

// MustNewRegistry is NewRegistry for configuration known to be valid (tests, defaults).
func MustNewRegistry(configs ...Config) *Registry {
	r, err := NewRegistry(configs)
	if err != nil {
		panic(err)
	}
	return r
}

// GetByName returns the namespace called name, or serviceerror.NamespaceNotFound.
func (r *Registry) GetByName(name string) (*Namespace, error) {
	if ns, ok := r.byName[name]; ok {
		return ns, nil
	}
	return nil, serviceerror.NewNamespaceNotFound(name)
}

// GetByID returns the namespace with the given ID, or serviceerror.NamespaceNotFound.
func (r *Registry) GetByID(id string) (*Namespace, error) {
	if ns, ok := r.byID[id]; ok {
		return ns, nil
	}
	return nil, serviceerror.NewNamespaceNotFound(id)
}

// Names returns every namespace name, sorted.
func (r *Registry) Names() []string { return slices.Clone(r.names) }

func validateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("name is required")
	case len(name) > MaxNameLength:
		return fmt.Errorf("name %.20q... is longer than %d bytes", name, MaxNameLength)
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("name %q has leading or trailing spaces", name)
	case strings.ContainsAny(name, "/\x00"):
		// "/" would make worker-command queue names ("temporal-sys/worker-commands/<ns>/<key>")
		// ambiguous.
		return fmt.Errorf("name %q contains '/' or NUL", name)
	}
	return nil
}
