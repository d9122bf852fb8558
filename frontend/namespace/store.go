package namespace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"

	"github.com/google/uuid"

	"github.com/vigilhq/vigil/common/clock"
)

// Store keeps namespaces for every host of a cluster (the server adapts
// persistence.NamespaceStore to it). Errors: ErrNotFound, ErrAlreadyExists,
// ErrVersionConflict, wrapped or not, or any other error of the store.
type Store interface {
	// Create stores a new namespace at Version 1.
	Create(ctx context.Context, ns StoredNamespace) error
	// Update replaces the namespace's Data if its stored version is ns.Version-1.
	Update(ctx context.Context, ns StoredNamespace) error
	Get(ctx context.Context, name string) (StoredNamespace, error)
	// List returns every namespace.
	List(ctx context.Context) ([]StoredNamespace, error)
	// Rename gives the namespace called from the name ns.Name, with ns's Data and Version, if
	// its stored version is ns.Version-1.
	Rename(ctx context.Context, from string, ns StoredNamespace) error
	// Delete removes the namespace called name with the given ID; a missing one is no error.
	Delete(ctx context.Context, name, id string) error
}

// Errors a Store reports.
var (
	ErrNotFound        = errors.New("namespace not found")
	ErrAlreadyExists   = errors.New("namespace already exists")
	ErrVersionConflict = errors.New("namespace changed concurrently")
)

// StoredNamespace is a namespace as the store keeps it: Data is its settings, encoded by this
// package.
type StoredNamespace struct {
	ID         string
	Name       string
	Data       []byte
	Version    int64
	CreateTime time.Time
	UpdateTime time.Time
}

// settings is what a stored namespace's Data holds (JSON, so that a field added later reads
// as its zero value from older rows).
type settings struct {
	Description string            `json:"description,omitempty"`
	OwnerEmail  string            `json:"ownerEmail,omitempty"`
	Retention   time.Duration     `json:"retention,omitempty"`
	Data        map[string]string `json:"data,omitempty"`
	// SearchAttributes maps each custom search attribute's name to its type, spelt as
	// Temporal's IndexedValueType enum names it ("Keyword", "Int", ...).
	SearchAttributes map[string]string `json:"searchAttributes,omitempty"`
	// Deleted and FormerName: see Namespace.
	Deleted    bool      `json:"deleted,omitempty"`
	FormerName string    `json:"formerName,omitempty"`
	DeleteTime time.Time `json:"deleteTime,omitzero"`
	PurgeTime  time.Time `json:"purgeTime,omitzero"`
}

func encode(ns *Namespace) []byte {
	var sa map[string]string
	if len(ns.SearchAttributes) > 0 {
		sa = make(map[string]string, len(ns.SearchAttributes))
		for name, t := range ns.SearchAttributes {
			sa[name] = t.String()
		}
	}
	b, err := json.Marshal(settings{Description: ns.Description, OwnerEmail: ns.OwnerEmail, Retention: ns.Retention, Data: ns.Data, SearchAttributes: sa,
		Deleted: ns.Deleted, FormerName: ns.FormerName, DeleteTime: ns.DeleteTime, PurgeTime: ns.PurgeTime})
	if err != nil {
		panic(err) // strings, a duration and a map of strings always marshal
	}
	return b
}

func decode(r StoredNamespace) (*Namespace, error) {
	var s settings
	if len(r.Data) > 0 {
		if err := json.Unmarshal(r.Data, &s); err != nil {
			return nil, fmt.Errorf("namespace %q: stored settings do not decode: %w", r.Name, err)
		}
	}
	if s.Data == nil {
		s.Data = map[string]string{}
	}
	sa := make(map[string]enumspb.IndexedValueType, len(s.SearchAttributes))
	for name, typeName := range s.SearchAttributes {
		t, err := enumspb.IndexedValueTypeFromString(typeName)
		if err != nil || t == enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED {
			return nil, fmt.Errorf("namespace %q: stored search attribute %q has unknown type %q", r.Name, name, typeName)
		}
		sa[name] = t
	}
	return &Namespace{
		Name: r.Name, ID: r.ID, Description: s.Description, OwnerEmail: s.OwnerEmail,
		Retention: s.Retention, Data: s.Data, SearchAttributes: sa, Version: r.Version,
		Deleted: s.Deleted, FormerName: s.FormerName, DeleteTime: s.DeleteTime, PurgeTime: s.PurgeTime,
	}, nil
}

// Defaults of a stored registry.
const (
	// RefreshIntervalDefault is how often a host re-reads every namespace from the store: how
	// long an update made through another host may take to show here. A namespace this host
	// has not seen is read at once (GetByName).
	RefreshIntervalDefault = 2 * time.Second
	// MissRefreshMinIntervalDefault bounds the store reads that lookups of unknown names cause,
	// so a client that sends made-up names cannot turn every call into a read.
	MissRefreshMinIntervalDefault = 250 * time.Millisecond
	// MissReadsPerSecondDefault bounds the point reads that lookups of names this host does not
	// know cause (burst as many): beyond it such a lookup is NotFound without a read, so a
	// client sending made-up names cannot load the database.
	MissReadsPerSecondDefault = 100
	// storeCallTimeout bounds one store read made on behalf of a lookup.
	storeCallTimeout = 5 * time.Second
	// updateAttempts bounds the retries of an update that raced another.
	updateAttempts = 5
)

// StoreOptions configures NewStoredRegistry.
type StoreOptions struct {
	RefreshInterval        time.Duration
	MissRefreshMinInterval time.Duration
	TimeSource             clock.TimeSource
	Logger                 *zap.Logger
}

// storeSync keeps a registry in step with its store.
type storeSync struct {
	r      *Registry
	store  Store
	opts   StoreOptions
	logger *zap.Logger

	mu          sync.Mutex // serializes refreshes and publications
	lastRefresh time.Time
	lookups     singleflight.Group
	missReads   *rate.Limiter

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// NewStoredRegistry returns a registry backed by store. Until Start it holds the configured
// namespaces only.
func NewStoredRegistry(configs []Config, store Store, opts StoreOptions) (*Registry, error) {
	r, err := NewRegistry(configs)
	if err != nil {
		return nil, err
	}
	r.AttachStore(store, opts)
	return r, nil
}

// AttachStore backs a registry made by NewRegistry with store, for a caller that builds the
// store after the registry. It must be called before Start and before the registry serves.
func (r *Registry) AttachStore(store Store, opts StoreOptions) {
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = RefreshIntervalDefault
	}
	if opts.MissRefreshMinInterval <= 0 {
		opts.MissRefreshMinInterval = MissRefreshMinIntervalDefault
	}
	if opts.TimeSource == nil {
		opts.TimeSource = clock.NewRealTimeSource()
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	r.store = &storeSync{r: r, store: store, opts: opts, logger: opts.Logger.With(zap.String("component", "namespace-registry")),
		missReads: rate.NewLimiter(MissReadsPerSecondDefault, MissReadsPerSecondDefault),
		stop:      make(chan struct{}), done: make(chan struct{})}
}

// Start creates the configured namespaces the store lacks, loads every namespace, and keeps
// re-reading them every RefreshInterval until Stop. A configured namespace that is stored with
// another ID than the one its configuration sets is an error; without an ID in the
// configuration, the stored one is kept.
func (r *Registry) Start(ctx context.Context) error {
	s := r.store
	if s == nil {
		return nil
	}
	for _, c := range r.configs {
		if err := s.ensure(ctx, c); err != nil {
			return err
		}
	}
	if err := s.refresh(ctx); err != nil {
		return err
	}
	go s.loop()
	return nil
}

// Stop ends the refresh loop started by Start.
func (r *Registry) Stop() {
	s := r.store
	if s == nil {
		return
	}
	s.stopOnce.Do(func() { close(s.stop) })
	select {
	case <-s.done:
	case <-time.After(storeCallTimeout):
	}
}

// Stored reports whether the registry keeps its namespaces in a store (RegisterNamespace and
// UpdateNamespace work).
func (r *Registry) Stored() bool { return r.store != nil }

func (s *storeSync) ensure(ctx context.Context, c Config) error {
	stored, err := s.store.Get(ctx, c.Name)
	switch {
	case err == nil:
		if c.ID != "" && stored.ID != c.ID {
			return fmt.Errorf("namespace %q: the configuration sets id %s but the store holds it with id %s", c.Name, c.ID, stored.ID)
		}
		return nil
	case !errors.Is(err, ErrNotFound):
		return fmt.Errorf("namespace %q: read from the store: %w", c.Name, err)
	}
	id := c.ID
	if id == "" {
		id = DeriveID(c.Name)
	}
	now := s.opts.TimeSource.Now()
	ns := &Namespace{Name: c.Name, ID: id, Description: c.Description, OwnerEmail: c.OwnerEmail}
	err = s.store.Create(ctx, StoredNamespace{ID: id, Name: c.Name, Data: encode(ns), Version: 1, CreateTime: now, UpdateTime: now})
	if err != nil && !errors.Is(err, ErrAlreadyExists) { // another host created it first: fine
		return fmt.Errorf("namespace %q: create in the store: %w", c.Name, err)
	}
	if err == nil {
		s.logger.Info("configured namespace created in the store", zap.String("namespace", c.Name), zap.String("namespace-id", id))
	}
	return nil
}

// refresh reads every namespace and publishes them.
func (s *storeSync) refresh(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshLocked(ctx)
}

func (s *storeSync) refreshLocked(ctx context.Context) error {
	records, err := s.store.List(ctx)
	if err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	s.lastRefresh = s.opts.TimeSource.Now()
	namespaces := make([]*Namespace, 0, len(records))
	for _, rec := range records {
		ns, err := decode(rec)
		if err != nil {
			s.logger.Error("namespace skipped", zap.Error(err))
			continue
		}
		namespaces = append(namespaces, ns)
	}
	s.r.publish(newSnapshot(namespaces))
	return nil
}

// lookUp reads one namespace this host does not know from the store and publishes it: a
// point read, shared by the concurrent lookups of the same name. Nil when the store has no
// such namespace (or cannot be read).
func (s *storeSync) lookUp(name string) *Namespace {
	if validateName(name) != nil || !s.missReads.Allow() {
		return nil // no such namespace can exist, or too many lookups missed: no read
	}
	v, _, _ := s.lookups.Do(name, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.Background(), storeCallTimeout)
		defer cancel()
		stored, err := s.store.Get(ctx, name)
		if err != nil {
			if !errors.Is(err, ErrNotFound) {
				s.logger.Warn("namespace lookup: store read failed", zap.String("namespace", name), zap.Error(err))
			}
			return (*Namespace)(nil), nil
		}
		ns, err := decode(stored)
		if err != nil {
			s.logger.Error("namespace lookup", zap.Error(err))
			return (*Namespace)(nil), nil
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.r.publish(s.r.current.Load().with(ns))
		return ns, nil
	})
	return v.(*Namespace)
}

// refreshOnMiss re-reads every namespace for a lookup by ID that missed, unless a refresh ran
// less than MissRefreshMinInterval ago (its result is already published), so that lookups of
// made-up IDs cannot turn every call into a read. It reports whether the snapshot may have
// changed.
func (s *storeSync) refreshOnMiss() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.TimeSource.Now().Sub(s.lastRefresh) < s.opts.MissRefreshMinInterval {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeCallTimeout)
	defer cancel()
	if err := s.refreshLocked(ctx); err != nil {
		s.logger.Warn("namespace lookup: store read failed", zap.Error(err))
		return false
	}
	return true
}

func (s *storeSync) loop() {
	defer close(s.done)
	for {
		ch, timer := s.opts.TimeSource.NewTimer(s.opts.RefreshInterval)
		select {
		case <-s.stop:
			timer.Stop()
			return
		case <-ch:
		}
		ctx, cancel := context.WithTimeout(context.Background(), storeCallTimeout)
		if err := s.refresh(ctx); err != nil {
			s.logger.Warn("namespace refresh failed; keeping the last known namespaces", zap.Error(err))
		}
		cancel()
	}
}

// Register creates a namespace in the store (RegisterNamespace). Its ID is derived from its
// name, as a configured namespace's is, so that declaring it in the configuration later names
// the same namespace. An existing name is NamespaceAlreadyExists; without a store it is
// FailedPrecondition.
func (r *Registry) Register(ctx context.Context, ns Namespace) (*Namespace, error) {
	if err := validateName(ns.Name); err != nil {
		return nil, serviceerror.NewInvalidArgument(err.Error())
	}
	if _, err := r.GetByName(ns.Name); err == nil {
		return nil, serviceerror.NewNamespaceAlreadyExists(fmt.Sprintf("namespace %q already exists", ns.Name))
	}
	if r.store == nil {
		return nil, serviceerror.NewFailedPrecondition(fmt.Sprintf(
			"namespace %q cannot be created at run time: this server keeps no namespace store; declare it in the server configuration (namespaces:)", ns.Name))
	}
	ns.ID = DeriveID(ns.Name)
	if _, taken := r.current.Load().byID[ns.ID]; taken {
		// A deleted namespace of the same name still holds the derived ID while its data is
		// removed: the new one, a different namespace, gets an ID of its own.
		ns.ID = uuid.NewString()
	}
	ns.Version = 1
	if ns.Data == nil {
		ns.Data = map[string]string{}
	}
	now := r.store.opts.TimeSource.Now()
	err := r.store.store.Create(ctx, StoredNamespace{ID: ns.ID, Name: ns.Name, Data: encode(&ns), Version: 1, CreateTime: now, UpdateTime: now})
	switch {
	case errors.Is(err, ErrAlreadyExists):
		return nil, serviceerror.NewNamespaceAlreadyExists(fmt.Sprintf("namespace %q already exists", ns.Name))
	case err != nil:
		return nil, serviceerror.NewUnavailable(fmt.Sprintf("namespace %q not created: %v", ns.Name, err))
	}
	r.publishAfterWrite(ctx)
	r.store.logger.Info("namespace registered", zap.String("namespace", ns.Name), zap.String("namespace-id", ns.ID))
	return &ns, nil
}

// Update changes a stored namespace (UpdateNamespace): change edits a copy of its latest
// stored version, which is written if nobody wrote another meanwhile (else it is read and
// edited again). An unknown name is NamespaceNotFound; without a store, FailedPrecondition.
func (r *Registry) Update(ctx context.Context, name string, change func(*Namespace) error) (*Namespace, error) {
	if r.store == nil {
		if _, err := r.GetByName(name); err != nil {
			return nil, err
		}
		return nil, serviceerror.NewFailedPrecondition(fmt.Sprintf(
			"namespace %q cannot be updated at run time: this server keeps no namespace store; change the server configuration (namespaces:)", name))
	}
	for range updateAttempts {
		stored, err := r.store.store.Get(ctx, name)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil, serviceerror.NewNamespaceNotFound(name)
		case err != nil:
			return nil, serviceerror.NewUnavailable(fmt.Sprintf("namespace %q: %v", name, err))
		}
		ns, err := decode(stored)
		if err != nil {
			return nil, serviceerror.NewInternal(err.Error())
		}
		if _, err := serving(ns, nil); err != nil {
			return nil, err
		}
		ns.Data = maps.Clone(ns.Data)
		ns.SearchAttributes = maps.Clone(ns.SearchAttributes)
		if err := change(ns); err != nil {
			return nil, err
		}
		ns.Version = stored.Version + 1
		err = r.store.store.Update(ctx, StoredNamespace{
			ID: stored.ID, Name: name, Data: encode(ns), Version: ns.Version,
			CreateTime: stored.CreateTime, UpdateTime: r.store.opts.TimeSource.Now(),
		})
		switch {
		case errors.Is(err, ErrVersionConflict):
			continue
		case errors.Is(err, ErrNotFound):
			return nil, serviceerror.NewNamespaceNotFound(name)
		case err != nil:
			return nil, serviceerror.NewUnavailable(fmt.Sprintf("namespace %q not updated: %v", name, err))
		}
		r.publishAfterWrite(ctx)
		r.store.logger.Info("namespace updated", zap.String("namespace", name), zap.Int64("version", ns.Version))
		return ns, nil
	}
	return nil, serviceerror.NewAborted(fmt.Sprintf("namespace %q is being updated concurrently: retry", name))
}

// DeletedNameSuffix is what DeleteNamespace appends to a namespace's name, followed by the
// first deletedIDChars characters of its ID, as Temporal names a deleted namespace: the name is
// free at once for a new namespace.
const (
	DeletedNameSuffix = "-deleted-"
	deletedIDChars    = 5
)

// Delete marks the namespace called name deleted (DeleteNamespace), its data to be removed
// from purgeDelay on: it is renamed
// "<name>-deleted-<first 5 characters of its ID>" (more of the ID if that name is taken) and
// serves no call from then on, on this host
// at once and on the others within RefreshInterval. Its data is removed afterwards (Purge,
// once the caller has removed it). The stored rename is the durable record that the removal
// is due. An unknown name is NamespaceNotFound; the default namespace, a namespace declared in
// the server configuration (it would be created again at the next start) or a registry
// without a store is FailedPrecondition.
func (r *Registry) Delete(ctx context.Context, name string, purgeDelay time.Duration) (*Namespace, error) {
	if _, err := r.GetByName(name); err != nil {
		return nil, err
	}
	for _, c := range r.configs {
		if c.Name == name {
			return nil, serviceerror.NewFailedPrecondition(fmt.Sprintf(
				"namespace %q is declared in the server configuration (namespaces:, or the default namespace): it cannot be deleted at run time", name))
		}
	}
	if r.store == nil {
		return nil, serviceerror.NewFailedPrecondition(fmt.Sprintf(
			"namespace %q cannot be deleted at run time: this server keeps no namespace store", name))
	}
	suffixLen := deletedIDChars
	for conflicts := 0; conflicts < updateAttempts; {
		stored, err := r.store.store.Get(ctx, name)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil, serviceerror.NewNamespaceNotFound(name)
		case err != nil:
			return nil, serviceerror.NewUnavailable(fmt.Sprintf("namespace %q: %v", name, err))
		}
		ns, err := decode(stored)
		if err != nil {
			return nil, serviceerror.NewInternal(err.Error())
		}
		now := r.store.opts.TimeSource.Now()
		ns.Deleted, ns.FormerName, ns.DeleteTime, ns.PurgeTime = true, name, now, now.Add(purgeDelay)
		if suffixLen > len(ns.ID) {
			return nil, serviceerror.NewInternal(fmt.Sprintf("namespace %q: no free name for it once deleted", name))
		}
		ns.Name = name + DeletedNameSuffix + ns.ID[:suffixLen]
		ns.Version = stored.Version + 1
		err = r.store.store.Rename(ctx, name, StoredNamespace{
			ID: stored.ID, Name: ns.Name, Data: encode(ns), Version: ns.Version,
			CreateTime: stored.CreateTime, UpdateTime: now,
		})
		switch {
		case errors.Is(err, ErrVersionConflict):
			conflicts++
			continue
		case errors.Is(err, ErrNotFound):
			return nil, serviceerror.NewNamespaceNotFound(name)
		case errors.Is(err, ErrAlreadyExists):
			suffixLen++ // the name is taken: a longer part of the ID, as Temporal does
			continue
		case err != nil:
			return nil, serviceerror.NewUnavailable(fmt.Sprintf("namespace %q not deleted: %v", name, err))
		}
		r.publishAfterWrite(ctx)
		r.store.logger.Info("namespace deleted: its data is being removed",
			zap.String("namespace", name), zap.String("deleted-namespace", ns.Name), zap.String("namespace-id", ns.ID))
		return ns, nil
	}
	return nil, serviceerror.NewAborted(fmt.Sprintf("namespace %q is being updated concurrently: retry", name))
}

// Purge removes a deleted namespace from the store, once its data is gone.
func (r *Registry) Purge(ctx context.Context, ns *Namespace) error {
	if r.store == nil || !ns.Deleted {
		return fmt.Errorf("namespace %q is not a deleted namespace of a store", ns.Name)
	}
	if err := r.store.store.Delete(ctx, ns.Name, ns.ID); err != nil {
		return err
	}
	r.publishAfterWrite(ctx)
	r.store.logger.Info("deleted namespace removed", zap.String("namespace", ns.Name), zap.String("namespace-id", ns.ID))
	return nil
}

// publishAfterWrite makes this host see its own write at once. Should the read fail, the
// refresh loop catches up.
func (r *Registry) publishAfterWrite(ctx context.Context) {
	if err := r.store.refresh(ctx); err != nil {
		r.store.logger.Warn("namespace refresh after a write failed", zap.Error(err))
	}
}
