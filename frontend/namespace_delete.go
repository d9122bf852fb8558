package frontend

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/frontend/auth"
	"github.com/vigilhq/vigil/frontend/namespace"
)

// DeleteNamespace deletes a namespace as Temporal does: at once it is renamed
// "<name>-deleted-<first 5 characters of its ID>" and marked deleted, so that it serves no
// call and its name can be registered again, and the API keys scoped to it are revoked; its
// activities are then removed in the background (namespaceDeleter), from the request's
// namespace_delete_delay on, and the namespace itself last, once its workers' records, which no
// heartbeat can renew any more, have ended by their own lifecycle (INACTIVE, CLEANED_UP,
// deleted).
// The renamed namespace is the durable record of the removal still due: a restart resumes it.
// The default namespace and namespaces declared in the server configuration are
// FailedPrecondition.
func (h *OperatorHandler) DeleteNamespace(ctx context.Context, req *operatorservice.DeleteNamespaceRequest) (*operatorservice.DeleteNamespaceResponse, error) {
	name := req.GetNamespace()
	if name == "" && req.GetNamespaceId() != "" {
		ns, err := h.deps.Namespaces.GetByID(req.GetNamespaceId())
		if err != nil {
			return nil, err
		}
		name = ns.Name
	}
	if err := requireNamespace(name); err != nil {
		return nil, err
	}
	var delay time.Duration
	if d := req.GetNamespaceDeleteDelay(); d != nil {
		if d.CheckValid() != nil || d.AsDuration() < 0 {
			return nil, invalid("namespace_delete_delay must be a valid, non-negative duration")
		}
		delay = d.AsDuration()
	}
	ns, err := h.deps.Namespaces.Delete(ctx, name, delay)
	if err != nil {
		return nil, err
	}
	// The name is free from now on: keys made for the old namespace must not open a new one
	// of the same name. A failure is retried by the background removal.
	if err := revokeAPIKeys(ctx, h.deps, ns); err != nil {
		h.deps.Logger.Warn("could not revoke the API keys of a deleted namespace yet (retried in the background)",
			tag.Namespace(ns.Name), tag.Error(err))
	}
	return &operatorservice.DeleteNamespaceResponse{DeletedNamespace: ns.Name}, nil
}

// Defaults of the background removal of deleted namespaces.
const (
	// namespaceDeleteScanInterval is how often every host looks for deleted namespaces whose
	// data is due for removal; it also looks at start and whenever its namespace registry
	// publishes (every refresh, and at once after a DeleteNamespace it served).
	namespaceDeleteScanInterval = 10 * time.Second
	// namespaceDeletePageSize is how many activities one pass lists at a time.
	namespaceDeletePageSize = 500
	// namespaceDeleteCallTimeout bounds each history call of the removal.
	namespaceDeleteCallTimeout = 10 * time.Second
)

// namespaceDeleter removes the data of deleted namespaces, on every host: each pass is
// idempotent (what another host removed first is NotFound, which counts as removed), so
// hosts need not agree on who does it. A namespace is purged from the store only once its
// activities are gone, so a pass that fails or a host that stops leaves it to the next pass.
type namespaceDeleter struct {
	deps Deps

	startOnce, stopOnce sync.Once
	stop, done          chan struct{}
	// passed, when set (tests), is told after every pass.
	passed func()
}

func newNamespaceDeleter(deps Deps) *namespaceDeleter {
	return &namespaceDeleter{deps: deps, stop: make(chan struct{}), done: make(chan struct{})}
}

// start runs passes until stopAndWait: one at once, then every namespaceDeleteScanInterval
// and after every publication of the namespace registry.
func (d *namespaceDeleter) start() {
	d.startOnce.Do(func() { go d.loop() })
}

// stopAndWait ends the passes; a pass in progress stops at its next call.
func (d *namespaceDeleter) stopAndWait() {
	d.stopOnce.Do(func() { close(d.stop) })
	d.startOnce.Do(func() { close(d.done) }) // never started: nothing to wait for
	<-d.done
}

func (d *namespaceDeleter) loop() {
	defer close(d.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-d.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		// Taken before the pass, so that a deletion published during it makes another.
		changed := d.deps.Namespaces.Changed()
		d.pass(ctx)
		// Armed before a test hears of the pass, so that a test moving a fake clock after it
		// moves it past this timer.
		timerC, timer := d.deps.TimeSource.NewTimer(namespaceDeleteScanInterval)
		if d.passed != nil {
			d.passed()
		}
		select {
		case <-d.stop:
			timer.Stop()
			return
		case <-changed:
			timer.Stop()
		case <-timerC:
		}
	}
}

// pass removes what is due of every deleted namespace this host knows.
func (d *namespaceDeleter) pass(ctx context.Context) {
	now := d.deps.TimeSource.Now()
	for _, ns := range d.deps.Namespaces.Deleted() {
		if ctx.Err() != nil {
			return
		}
		if now.Before(ns.PurgeTime) {
			continue
		}
		if err := d.remove(ctx, ns); err != nil {
			if errors.Is(err, errWorkersRemain) {
				d.deps.Logger.Debug("deleted namespace kept until its worker records end", tag.Namespace(ns.Name))
				continue
			}
			if ctx.Err() == nil {
				d.deps.Logger.Warn("removing a deleted namespace's data failed; the next pass resumes it",
					tag.Namespace(ns.Name), tag.NamespaceID(ns.ID), tag.Error(err))
			}
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, namespaceDeleteCallTimeout)
		err := d.deps.Namespaces.Purge(pctx, ns)
		cancel()
		if err != nil && ctx.Err() == nil {
			d.deps.Logger.Warn("could not remove a deleted namespace from the store; the next pass does",
				tag.Namespace(ns.Name), tag.Error(err))
		}
	}
}

// remove removes a deleted namespace's API keys and activities. Activities are listed from the
// start again after every page: the removed ones are gone, so the listing shrinks until empty.
func (d *namespaceDeleter) remove(ctx context.Context, ns *namespace.Namespace) error {
	if err := revokeAPIKeys(ctx, d.deps, ns); err != nil {
		return err
	}
	for {
		lctx, cancel := context.WithTimeout(ctx, namespaceDeleteCallTimeout)
		page, err := d.deps.History.ListActivities(lctx, &activitypb.ListActivitiesRequest{NamespaceId: ns.ID, PageSize: namespaceDeletePageSize})
		cancel()
		if err != nil {
			return err
		}
		if len(page.GetActivities()) == 0 {
			break
		}
		for _, a := range page.GetActivities() {
			if err := d.removeActivity(ctx, ns, a.GetActivityId(), a.GetRunId()); err != nil {
				return err
			}
		}
	}
	// Worker records end by their own lifecycle: no heartbeat renews them any more, so they
	// become INACTIVE, CLEANED_UP and then deleted. Until then the namespace keeps its ID, so
	// that a new namespace of the same name (which gets an ID of its own meanwhile) never shows
	// them.
	lctx, cancel := context.WithTimeout(ctx, namespaceDeleteCallTimeout)
	defer cancel()
	workers, err := d.deps.History.ListWorkers(lctx, &workerpb.ListWorkersRequest{NamespaceId: ns.ID, PageSize: 1})
	if err != nil {
		return err
	}
	if len(workers.GetWorkers()) > 0 || len(workers.GetNextPageToken()) > 0 {
		return errWorkersRemain
	}
	return nil
}

// errWorkersRemain defers the purge of a deleted namespace until its worker records have ended.
var errWorkersRemain = errors.New("worker records of the namespace remain until they end")

// removeActivity terminates the activity if it still runs, and deletes it.
func (d *namespaceDeleter) removeActivity(ctx context.Context, ns *namespace.Namespace, activityID, runID string) error {
	cctx, cancel := context.WithTimeout(ctx, namespaceDeleteCallTimeout)
	defer cancel()
	// A closed activity refuses termination; the delete below is what must succeed.
	_, _ = d.deps.History.TerminateActivity(cctx, &activitypb.TerminateActivityRequest{
		NamespaceId: ns.ID, ActivityId: activityID, RunId: runID,
		Reason: "namespace " + ns.FormerName + " deleted", Identity: "vigil namespace deletion",
	})
	_, err := d.deps.History.DeleteActivity(cctx, &activitypb.DeleteActivityRequest{NamespaceId: ns.ID, ActivityId: activityID, RunId: runID})
	var notFound *serviceerror.NotFound
	if err != nil && !errors.As(err, &notFound) {
		return err
	}
	return nil
}

// revokeAPIKeys revokes the keys scoped to the namespace's former name that were made before
// its deletion (a namespace registered later under that name may have keys of its own).
func revokeAPIKeys(ctx context.Context, deps Deps, ns *namespace.Namespace) error {
	if deps.APIKeys == nil || ns.FormerName == "" {
		return nil
	}
	keys, err := deps.APIKeys.ListAPIKeys(ctx, ns.FormerName)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if !k.RevokeTime.IsZero() || k.CreateTime.After(ns.DeleteTime) {
			continue
		}
		if err := deps.APIKeys.RevokeAPIKey(ctx, k.ID, deps.TimeSource.Now()); err != nil && !errors.Is(err, auth.ErrAPIKeyNotFound) {
			return err
		}
		deps.Logger.Info("API key of a deleted namespace revoked", zap.String("api-key-id", k.ID), tag.Namespace(ns.Name))
	}
	return nil
}
