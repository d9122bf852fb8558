// Package namespace is the frontend's registry of namespaces.
//
// A namespace has a name (what clients send and what dynamic config is keyed by) and an ID
// (what history keys executions and shards by). Namespaces come from the static configuration
// and, with a Store (store.go), from RegisterNamespace at run time: the store holds them for
// every host of a cluster, and each host's registry follows it.
package namespace

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
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

// Namespace is a resolved namespace. It is never modified once published: an update
// publishes a new value.
type Namespace struct {
	Name        string
	ID          string
	Description string
	OwnerEmail  string
	// Retention is the workflow execution retention Temporal tools set and show; vigil keeps
	// no workflow histories, so it only records it.
	Retention time.Duration
	// Data is the namespace's free-form key/value data.
	Data map[string]string
	// SearchAttributes are the namespace's custom search attributes (OperatorService
	// AddSearchAttributes) and their types. Never nil for a stored namespace; nil for one of
	// the static configuration only, which has none.
	SearchAttributes map[string]enumspb.IndexedValueType
	// Version counts the namespace's stored versions (0: not stored, static configuration only).
	Version int64
	// Deleted is set once DeleteNamespace renamed the namespace (Name is then the new name and
	// FormerName the one it had): it serves no call and its data is being removed.
	Deleted    bool
	FormerName string
	// DeleteTime is when it was deleted; its data is removed from PurgeTime on (the request's
	// namespace_delete_delay after DeleteTime).
	DeleteTime, PurgeTime time.Time
}

// DeriveID returns the ID a namespace gets when its configuration names none: a UUIDv5 of the
// name. Executions are keyed and sharded by namespace ID, so the ID must be the same on every
// host and after every restart. Without a namespace store, hashing the name is the only way to
// get that: a random ID would be different on the next start and orphan everything stored.
func DeriveID(name string) string {
	return uuid.NewSHA1(idSpace, []byte(name)).String()
}

// Registry resolves namespaces by name and by ID. It is safe for concurrent use. Without a
// store (NewRegistry) it holds the configured namespaces and never changes; with one
// (NewStoredRegistry) it follows the store (store.go).
type Registry struct {
	current atomic.Pointer[snapshot]
	configs []Config

	// changed is closed, and replaced, at every publication of a snapshot (Changed).
	changedMu sync.Mutex
	changed   chan struct{}

	// Set by NewStoredRegistry.
	store *storeSync
}

// snapshot is an immutable view of every namespace. byName and byID hold the deleted ones
// too; names and deleted split them.
type snapshot struct {
	byName  map[string]*Namespace
	byID    map[string]*Namespace
	names   []string
	deleted []*Namespace
}

// with returns a copy of s with ns added (or replacing the namespace of the same name).
func (s *snapshot) with(ns *Namespace) *snapshot {
	namespaces := make([]*Namespace, 0, len(s.byName)+1)
	for _, n := range s.byName {
		if n.Name != ns.Name {
			namespaces = append(namespaces, n)
		}
	}
	return newSnapshot(append(namespaces, ns))
}

func newSnapshot(namespaces []*Namespace) *snapshot {
	s := &snapshot{byName: make(map[string]*Namespace, len(namespaces)), byID: make(map[string]*Namespace, len(namespaces))}
	for _, ns := range namespaces {
		s.byName[ns.Name] = ns
		s.byID[ns.ID] = ns
		if ns.Deleted {
			s.deleted = append(s.deleted, ns)
			continue
		}
		s.names = append(s.names, ns.Name)
	}
	slices.Sort(s.names)
	return s
}

// NewRegistry builds a registry from configuration. The default namespace is added unless
// configured. Names must be unique and valid; IDs (given or derived) must be unique.
func NewRegistry(configs []Config) (*Registry, error) {
	configured, configs, err := resolveConfigs(configs)
	if err != nil {
		return nil, err
	}
	r := &Registry{configs: configs, changed: make(chan struct{})}
	r.current.Store(newSnapshot(configured))
	return r, nil
}

// resolveConfigs validates the configuration and resolves each namespace's ID.
func resolveConfigs(configs []Config) ([]*Namespace, []Config, error) {
	hasDefault := slices.ContainsFunc(configs, func(c Config) bool { return c.Name == DefaultName })
	if !hasDefault {
		configs = append([]Config{{Name: DefaultName, Description: "The default namespace."}}, configs...)
	}
	byName := make(map[string]bool)
	byID := make(map[string]string)
	var out []*Namespace
	for i, c := range configs {
		if err := validateName(c.Name); err != nil {
			return nil, nil, fmt.Errorf("namespace %d: %w", i, err)
		}
		if byName[c.Name] {
			return nil, nil, fmt.Errorf("namespace %q: declared twice", c.Name)
		}
		id := c.ID
		if id == "" {
			id = DeriveID(c.Name)
		} else if _, err := uuid.Parse(id); err != nil {
			return nil, nil, fmt.Errorf("namespace %q: id %q is not a UUID: %w", c.Name, id, err)
		}
		if other, dup := byID[id]; dup {
			return nil, nil, fmt.Errorf("namespace %q: id %s is already used by namespace %q", c.Name, id, other)
		}
		byName[c.Name], byID[id] = true, c.Name
		out = append(out, &Namespace{Name: c.Name, ID: id, Description: c.Description, OwnerEmail: c.OwnerEmail, Data: map[string]string{}})
	}
	return out, configs, nil
}

// MustNewRegistry is NewRegistry for configuration known to be valid (tests, defaults).
func MustNewRegistry(configs ...Config) *Registry {
	r, err := NewRegistry(configs)
	if err != nil {
		panic(err)
	}
	return r
}

// GetByName returns the namespace called name, or serviceerror.NamespaceNotFound. With a
// store, a name this host has not seen is looked up in the store before it is NotFound: it may
// have been registered through another host a moment ago.
//
// A deleted namespace (under its new name) is NamespaceInvalidState: it serves no call.
func (r *Registry) GetByName(name string) (*Namespace, error) {
	return serving(r.Lookup(name))
}

// Lookup is GetByName for deleted namespaces too (DescribeNamespace shows them).
func (r *Registry) Lookup(name string) (*Namespace, error) {
	if ns, ok := r.current.Load().byName[name]; ok {
		return ns, nil
	}
	if r.store != nil {
		if ns := r.store.lookUp(name); ns != nil {
			return ns, nil
		}
	}
	return nil, serviceerror.NewNamespaceNotFound(name)
}

func serving(ns *Namespace, err error) (*Namespace, error) {
	if err != nil {
		return nil, err
	}
	if ns.Deleted {
		return nil, serviceerror.NewNamespaceInvalidState(ns.Name, enumspb.NAMESPACE_STATE_DELETED, []enumspb.NamespaceState{enumspb.NAMESPACE_STATE_REGISTERED})
	}
	return ns, nil
}

// GetByID returns the namespace with the given ID, or serviceerror.NamespaceNotFound (after a
// look in the store, as GetByName).
func (r *Registry) GetByID(id string) (*Namespace, error) {
	return serving(r.LookupID(id))
}

// LookupID is GetByID for deleted namespaces too.
func (r *Registry) LookupID(id string) (*Namespace, error) {
	if ns, ok := r.current.Load().byID[id]; ok {
		return ns, nil
	}
	if r.store != nil && r.store.refreshOnMiss() {
		if ns, ok := r.current.Load().byID[id]; ok {
			return ns, nil
		}
	}
	return nil, serviceerror.NewNamespaceNotFound(id)
}

// publish makes s the current snapshot and wakes those waiting on Changed.
func (r *Registry) publish(s *snapshot) {
	r.current.Store(s)
	r.changedMu.Lock()
	defer r.changedMu.Unlock()
	close(r.changed)
	r.changed = make(chan struct{})
}

// Changed returns a channel closed the next time the registry publishes what it read from its
// store (at every refresh, and at once after a write of this host), changed or not.
func (r *Registry) Changed() <-chan struct{} {
	r.changedMu.Lock()
	defer r.changedMu.Unlock()
	return r.changed
}

// Names returns the name of every namespace that is not deleted, sorted.
func (r *Registry) Names() []string { return slices.Clone(r.current.Load().names) }

// Deleted returns the namespaces DeleteNamespace marked deleted whose data is not yet removed.
func (r *Registry) Deleted() []*Namespace { return slices.Clone(r.current.Load().deleted) }

// ValidateName checks a namespace name as RegisterNamespace does.
func ValidateName(name string) error { return validateName(name) }

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
