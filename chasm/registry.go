package chasm

import (
	"fmt"
	"hash/fnv"
	"maps"
	"reflect"
	"regexp"
	"slices"

	"google.golang.org/protobuf/proto"
)

// Library is a plugin that contributes components and tasks. Its name qualifies the names of
// everything it registers.
type Library interface {
	Name() string
	Components() []*RegistrableComponent
	Tasks() []*RegistrableTask
}

// ComponentOption configures a component registration.
type ComponentOption func(*RegistrableComponent)

// WithCollections declares the keyed collections the component keeps beside its state.
func WithCollections(names ...string) ComponentOption {
	return func(c *RegistrableComponent) { c.collections = append(c.collections, names...) }
}

// RegistrableComponent is a component type as registered by a library.
type RegistrableComponent struct {
	name        string
	fullName    string
	id          uint32
	goType      reflect.Type
	newState    func() proto.Message
	fromState   func(proto.Message) Component
	collections []string
	// observer sees committed changes (WithCommitObserver).
	observer CommitObserver
	// copyState makes a transaction's copy of the committed state (WithCopyOnWrite); nil:
	// proto.Clone.
	copyState func(proto.Message) proto.Message
	// singletonTimers are the singleton timer types that run on the component.
	singletonTimers []*RegistrableTask
}

// NewRegistrableComponent declares a component type named name (unique within its library)
// whose state message is S. fromState builds the component view over a state message; engines
// call it with a private copy for every transaction.
func NewRegistrableComponent[C Component, S proto.Message](
	name string, fromState func(S) C, opts ...ComponentOption,
) *RegistrableComponent {
	var zero S
	msgType := zero.ProtoReflect().Type()
	c := &RegistrableComponent{
		name:      name,
		goType:    reflect.TypeFor[C](),
		newState:  func() proto.Message { return msgType.New().Interface() },
		fromState: func(m proto.Message) Component { return fromState(m.(S)) },
	}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// Name returns the library-local name.
func (c *RegistrableComponent) Name() string { return c.name }

// FullName returns the library-qualified name, which is the archetype of executions rooted
// at this component; set at registration.
func (c *RegistrableComponent) FullName() string { return c.fullName }

// ID returns the stable numeric ID derived from FullName; set at registration.
func (c *RegistrableComponent) ID() uint32 { return c.id }

// Registry holds every registered library. It is built once at startup and read-only after.
type Registry struct {
	libraries        map[string]Library
	components       map[string]*RegistrableComponent
	componentsByID   map[uint32]*RegistrableComponent
	componentsByType map[reflect.Type]*RegistrableComponent
	tasks            map[string]*RegistrableTask
	tasksByID        map[uint32]*RegistrableTask
	tasksByPayload   map[reflect.Type]*RegistrableTask
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{
		libraries:        make(map[string]Library),
		components:       make(map[string]*RegistrableComponent),
		componentsByID:   make(map[uint32]*RegistrableComponent),
		componentsByType: make(map[reflect.Type]*RegistrableComponent),
		tasks:            make(map[string]*RegistrableTask),
		tasksByID:        make(map[uint32]*RegistrableTask),
		tasksByPayload:   make(map[reflect.Type]*RegistrableTask),
	}
}

var validName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

// Register adds a library. It fails, registering nothing, on an invalid or duplicate name, an ID
// collision, a payload type used by two task types, or a task of an unregistered component.
func (r *Registry) Register(lib Library) error {
	libName := lib.Name()
	if !validName.MatchString(libName) {
		return fmt.Errorf("chasm: invalid library name %q", libName)
	}
	if _, ok := r.libraries[libName]; ok {
		return fmt.Errorf("chasm: library %q is already registered", libName)
	}

	// Validate everything before mutating the registry, so a failed Register leaves it as it was.
	components := lib.Components()
	tasks := lib.Tasks()
	newComponents := make(map[string]*RegistrableComponent)
	newComponentIDs := make(map[uint32]string)
	newComponentTypes := make(map[reflect.Type]string)
	for _, c := range components {
		if !validName.MatchString(c.name) {
			return fmt.Errorf("chasm: library %s: invalid component name %q", libName, c.name)
		}
		fullName := libName + "." + c.name
		if _, ok := newComponents[fullName]; ok {
			return fmt.Errorf("chasm: component %s is registered twice", fullName)
		}
		id := stableID(fullName)
		if other, ok := r.componentsByID[id]; ok {
			return fmt.Errorf("chasm: component %s collides with %s (id %d)", fullName, other.fullName, id)
		}
		if other, ok := newComponentIDs[id]; ok {
			return fmt.Errorf("chasm: component %s collides with %s (id %d)", fullName, other, id)
		}
		if other, ok := r.componentsByType[c.goType]; ok {
			return fmt.Errorf("chasm: Go type %v is already registered as %s", c.goType, other.fullName)
		}
		if other, ok := newComponentTypes[c.goType]; ok {
			return fmt.Errorf("chasm: Go type %v is already registered as %s", c.goType, other)
		}
		for _, name := range c.collections {
			// Engines may store a collection under names derived from it (the durable host
			// packs entries into rows named "#" + name): a plain identifier never collides.
			if !validName.MatchString(name) {
				return fmt.Errorf("chasm: component %s: invalid collection name %q", fullName, name)
			}
		}
		newComponents[fullName] = c
		newComponentIDs[id] = fullName
		newComponentTypes[c.goType] = fullName
	}

	newTasks := make(map[string]*RegistrableTask)
	newTaskIDs := make(map[uint32]string)
	newPayloads := make(map[reflect.Type]string)
	for _, t := range tasks {
		if !validName.MatchString(t.name) {
			return fmt.Errorf("chasm: library %s: invalid task name %q", libName, t.name)
		}
		fullName := libName + "." + t.name
		if _, ok := newTasks[fullName]; ok {
			return fmt.Errorf("chasm: task %s is registered twice", fullName)
		}
		id := stableID(fullName)
		if other, ok := r.tasksByID[id]; ok {
			return fmt.Errorf("chasm: task %s collides with %s (id %d)", fullName, other.fullName, id)
		}
		if other, ok := newTaskIDs[id]; ok {
			return fmt.Errorf("chasm: task %s collides with %s (id %d)", fullName, other, id)
		}
		if other, ok := r.tasksByPayload[t.payloadType]; ok {
			return fmt.Errorf("chasm: payload type %v of task %s is already used by %s", t.payloadType, fullName, other.fullName)
		}
		if other, ok := newPayloads[t.payloadType]; ok {
			return fmt.Errorf("chasm: payload type %v of task %s is already used by %s", t.payloadType, fullName, other)
		}
		if _, ok := r.componentsByType[t.componentType]; !ok {
			if _, ok := newComponentTypes[t.componentType]; !ok {
				return fmt.Errorf("chasm: task %s runs on %v, which is not a registered component", fullName, t.componentType)
			}
		}
		if t.singleton && !t.pure {
			// Side-effect singletons would need the outbound queue to replace rows in place,
			// which nothing needs yet.
			return fmt.Errorf("chasm: task %s: only pure tasks can be singleton timers", fullName)
		}
		newTasks[fullName] = t
		newTaskIDs[id] = fullName
		newPayloads[t.payloadType] = fullName
	}

	r.libraries[libName] = lib
	for fullName, c := range newComponents {
		c.fullName = fullName
		c.id = stableID(fullName)
		r.components[fullName] = c
		r.componentsByID[c.id] = c
		r.componentsByType[c.goType] = c
	}
	for fullName, t := range newTasks {
		t.fullName = fullName
		t.id = stableID(fullName)
		r.tasks[fullName] = t
		r.tasksByID[t.id] = t
		r.tasksByPayload[t.payloadType] = t
		if c := r.componentsByType[t.componentType]; t.singleton && !slices.Contains(c.singletonTimers, t) {
			c.singletonTimers = append(c.singletonTimers, t)
		}
	}
	return nil
}

// SingletonTimers returns the singleton timer types of the component's executions.
func (c *RegistrableComponent) SingletonTimers() []*RegistrableTask { return c.singletonTimers }

// Component returns the component registered under a full name (an archetype).
func (r *Registry) Component(fullName string) (*RegistrableComponent, bool) {
	c, ok := r.components[fullName]
	return c, ok
}

// Components returns every registered component, sorted by full name.
func (r *Registry) Components() []*RegistrableComponent {
	out := make([]*RegistrableComponent, 0, len(r.components))
	for _, name := range slices.Sorted(maps.Keys(r.components)) {
		out = append(out, r.components[name])
	}
	return out
}

// HasVisibility reports whether the component is a VisibilityComponent.
func (c *RegistrableComponent) HasVisibility() bool {
	_, ok := c.fromState(c.newState()).(VisibilityComponent)
	return ok
}

// ComponentByID returns the component with a stable ID.
func (r *Registry) ComponentByID(id uint32) (*RegistrableComponent, bool) {
	c, ok := r.componentsByID[id]
	return c, ok
}

// ComponentFor returns the registration of the Go component type t.
func (r *Registry) ComponentFor(t reflect.Type) (*RegistrableComponent, bool) {
	c, ok := r.componentsByType[t]
	return c, ok
}

// Task returns the task type registered under a full name.
func (r *Registry) Task(fullName string) (*RegistrableTask, bool) {
	t, ok := r.tasks[fullName]
	return t, ok
}

// TaskByID returns the task type with a stable ID.
func (r *Registry) TaskByID(id uint32) (*RegistrableTask, bool) {
	t, ok := r.tasksByID[id]
	return t, ok
}

// TaskForPayload returns the task type whose payload has the Go type of payload.
func (r *Registry) TaskForPayload(payload proto.Message) (*RegistrableTask, bool) {
	t, ok := r.tasksByPayload[reflect.TypeOf(payload)]
	return t, ok
}

// ArchetypeOf returns the archetype (full name) of the component type C.
func ArchetypeOf[C Component](r *Registry) (string, error) {
	c, ok := r.componentsByType[reflect.TypeFor[C]()]
	if !ok {
		return "", fmt.Errorf("chasm: component type %v is not registered", reflect.TypeFor[C]())
	}
	return c.fullName, nil
}

// stableID derives a persisted identifier from a full name. IDs never change for a name, so
// stored rows stay readable across releases; Register refuses the rare collision.
func stableID(fullName string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(fullName))
	return h.Sum32()
}
