package frontend

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/mock/gomock"
	"google.golang.org/protobuf/types/known/durationpb"

	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/log"
	"github.com/vigilhq/vigil/frontend/auth"
	"github.com/vigilhq/vigil/frontend/namespace"
)

// fakeAPIKeys is an in-memory auth.APIKeyStore.
type fakeAPIKeys struct {
	mu   sync.Mutex
	keys map[string]*auth.APIKey
}

func (f *fakeAPIKeys) CreateAPIKey(_ context.Context, k auth.APIKey) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys[k.ID] = &k
	return nil
}

func (f *fakeAPIKeys) GetAPIKeyByHash(context.Context, []byte) (*auth.APIKey, error) {
	return nil, auth.ErrAPIKeyNotFound
}

func (f *fakeAPIKeys) ListAPIKeys(_ context.Context, ns string) ([]*auth.APIKey, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*auth.APIKey
	for _, k := range f.keys {
		if ns == "" || k.Namespace == ns {
			c := *k
			out = append(out, &c)
		}
	}
	return out, nil
}

func (f *fakeAPIKeys) RevokeAPIKey(_ context.Context, id string, at time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k, ok := f.keys[id]
	if !ok {
		return auth.ErrAPIKeyNotFound
	}
	if k.RevokeTime.IsZero() {
		k.RevokeTime = at
	}
	return nil
}

func (f *fakeAPIKeys) revoked(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.keys[id].RevokeTime.IsZero()
}

type deleteEnv struct {
	ts       *clock.FakeTimeSource
	history  *MockHistoryClient
	store    *namespace.MemoryStore
	registry *namespace.Registry
	keys     *fakeAPIKeys
	handler  *WorkflowHandler
	operator *OperatorHandler
	passed   chan struct{}
	shop     *namespace.Namespace
	// workersLeft is how many worker records history lists for the namespace.
	workersLeft atomic.Int32
}

func newDeleteEnv(t *testing.T) *deleteEnv {
	t.Helper()
	e := &deleteEnv{ts: clock.NewFakeTimeSource(), store: namespace.NewMemoryStore(), passed: make(chan struct{}, 16),
		keys: &fakeAPIKeys{keys: map[string]*auth.APIKey{}}}
	e.ts.Update(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	logger := log.NewTestLogger(t)
	var err error
	e.registry, err = namespace.NewStoredRegistry(nil, e.store, namespace.StoreOptions{TimeSource: e.ts, Logger: logger, RefreshInterval: time.Hour})
	require.NoError(t, err)
	require.NoError(t, e.registry.Start(context.Background()))
	t.Cleanup(e.registry.Stop)
	e.shop, err = e.registry.Register(context.Background(), namespace.Namespace{Name: "shop"})
	require.NoError(t, err)
	e.history = NewMockHistoryClient(gomock.NewController(t))
	deps := Deps{History: e.history, Namespaces: e.registry, APIKeys: e.keys, TimeSource: e.ts, Logger: logger}
	e.handler, e.operator = NewWorkflowHandler(deps), NewOperatorHandler(deps)
	e.handler.deleter.passed = func() { e.passed <- struct{}{} }
	e.history.EXPECT().ListWorkers(gomock.Any(), gomock.Any()).AnyTimes().DoAndReturn(
		func(_ context.Context, req *workerpb.ListWorkersRequest) (*workerpb.ListWorkersResponse, error) {
			if e.workersLeft.Load() > 0 {
				return &workerpb.ListWorkersResponse{Workers: []*workerpb.WorkerRecord{{}}}, nil
			}
			return &workerpb.ListWorkersResponse{}, nil
		})
	t.Cleanup(e.handler.Stop)
	return e
}

func (e *deleteEnv) awaitPass(t *testing.T) {
	t.Helper()
	select {
	case <-e.passed:
	case <-time.After(10 * time.Second):
		t.Fatal("no removal pass ran")
	}
}

func listed(ids ...string) *activitypb.ListActivitiesResponse {
	resp := &activitypb.ListActivitiesResponse{}
	for _, id := range ids {
		resp.Activities = append(resp.Activities, &activitypb.ListedActivity{ActivityId: id, RunId: "run-" + id})
	}
	return resp
}

func TestDeleteNamespace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("MarkedAtOnceAndRemovedInTheBackground", func(t *testing.T) {
		t.Parallel()
		e := newDeleteEnv(t)
		require.NoError(t, e.keys.CreateAPIKey(ctx, auth.APIKey{ID: "shop-key", Namespace: "shop", CreateTime: e.ts.Now().Add(-time.Hour)}))
		require.NoError(t, e.keys.CreateAPIKey(ctx, auth.APIKey{ID: "other-key", Namespace: "other", CreateTime: e.ts.Now().Add(-time.Hour)}))

		e.handler.deleter.start()
		e.awaitPass(t) // nothing deleted yet

		// The background pass: every activity terminated (a closed one refuses) and deleted,
		// then the namespace itself.
		gomock.InOrder(
			e.history.EXPECT().ListActivities(gomock.Any(), gomock.Any()).Return(listed("a1", "a2"), nil),
			e.history.EXPECT().ListActivities(gomock.Any(), gomock.Any()).Return(listed(), nil),
		)
		e.history.EXPECT().TerminateActivity(gomock.Any(), gomock.Any()).DoAndReturn(
			func(_ context.Context, req *activitypb.TerminateActivityRequest) (*activitypb.TerminateActivityResponse, error) {
				require.Equal(t, e.shop.ID, req.GetNamespaceId())
				if req.GetActivityId() == "a2" {
					return nil, serviceerror.NewFailedPrecondition("already closed")
				}
				return &activitypb.TerminateActivityResponse{}, nil
			}).Times(2)
		deleted := map[string]bool{}
		e.history.EXPECT().DeleteActivity(gomock.Any(), gomock.Any()).DoAndReturn(
			func(_ context.Context, req *activitypb.DeleteActivityRequest) (*activitypb.DeleteActivityResponse, error) {
				deleted[req.GetActivityId()+"/"+req.GetRunId()] = true
				return &activitypb.DeleteActivityResponse{}, nil
			}).Times(2)
		resp, err := e.operator.DeleteNamespace(ctx, &operatorservice.DeleteNamespaceRequest{Namespace: "shop"})
		require.NoError(t, err)
		require.Equal(t, "shop-deleted-"+e.shop.ID[:5], resp.GetDeletedNamespace())
		require.True(t, e.keys.revoked("shop-key"), "the namespace's keys are revoked before the answer")
		require.False(t, e.keys.revoked("other-key"))
		_, err = e.registry.GetByName("shop")
		require.Error(t, err)
		e.awaitPass(t)
		require.Equal(t, map[string]bool{"a1/run-a1": true, "a2/run-a2": true}, deleted)
		_, err = e.store.Get(ctx, resp.GetDeletedNamespace())
		require.ErrorIs(t, err, namespace.ErrNotFound, "purged from the store")
		require.Empty(t, e.registry.Deleted())
	})

	t.Run("AFailedPassIsResumed", func(t *testing.T) {
		t.Parallel()
		e := newDeleteEnv(t)
		e.handler.deleter.start()
		e.awaitPass(t)
		gomock.InOrder(
			e.history.EXPECT().ListActivities(gomock.Any(), gomock.Any()).Return(nil, serviceerror.NewUnavailable("shard moving")),
			e.history.EXPECT().ListActivities(gomock.Any(), gomock.Any()).Return(listed(), nil),
		)
		_, err := e.operator.DeleteNamespace(ctx, &operatorservice.DeleteNamespaceRequest{Namespace: "shop"})
		require.NoError(t, err)
		e.awaitPass(t)
		require.Len(t, e.registry.Deleted(), 1, "kept, marked, for the next pass")
		e.ts.Advance(namespaceDeleteScanInterval)
		e.awaitPass(t)
		require.Empty(t, e.registry.Deleted())
	})

	t.Run("KeptUntilItsWorkerRecordsEnd", func(t *testing.T) {
		t.Parallel()
		e := newDeleteEnv(t)
		e.workersLeft.Store(1)
		e.history.EXPECT().ListActivities(gomock.Any(), gomock.Any()).AnyTimes().Return(listed(), nil)
		e.handler.deleter.start()
		e.awaitPass(t)
		_, err := e.operator.DeleteNamespace(ctx, &operatorservice.DeleteNamespaceRequest{Namespace: "shop"})
		require.NoError(t, err)
		e.awaitPass(t)
		require.Len(t, e.registry.Deleted(), 1)
		fresh, err := e.registry.Register(ctx, namespace.Namespace{Name: "shop"})
		require.NoError(t, err)
		require.NotEqual(t, e.shop.ID, fresh.ID, "the old ID is still the deleted namespace's")
		e.awaitPass(t) // the registration's publication
		require.Len(t, e.registry.Deleted(), 1)
		e.workersLeft.Store(0)
		e.ts.Advance(namespaceDeleteScanInterval)
		e.awaitPass(t)
		require.Empty(t, e.registry.Deleted())
	})

	t.Run("TheDelayIsHonoured", func(t *testing.T) {
		t.Parallel()
		e := newDeleteEnv(t)
		e.handler.deleter.start()
		e.awaitPass(t)
		_, err := e.operator.DeleteNamespace(ctx, &operatorservice.DeleteNamespaceRequest{
			NamespaceId: e.shop.ID, NamespaceDeleteDelay: durationpb.New(time.Minute)})
		require.NoError(t, err)
		e.awaitPass(t) // nothing due: no history call (the mock would fail the test)
		require.Len(t, e.registry.Deleted(), 1)
		e.history.EXPECT().ListActivities(gomock.Any(), gomock.Any()).Return(listed(), nil)
		e.ts.Advance(time.Minute)
		e.awaitPass(t)
		require.Empty(t, e.registry.Deleted())
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		e := newDeleteEnv(t)
		for name, req := range map[string]*operatorservice.DeleteNamespaceRequest{
			"NoNamespace":   {},
			"NegativeDelay": {Namespace: "shop", NamespaceDeleteDelay: durationpb.New(-time.Second)},
		} {
			_, err := e.operator.DeleteNamespace(ctx, req)
			var invalid *serviceerror.InvalidArgument
			require.ErrorAs(t, err, &invalid, name)
		}
		var failed *serviceerror.FailedPrecondition
		_, err := e.operator.DeleteNamespace(ctx, &operatorservice.DeleteNamespaceRequest{Namespace: namespace.DefaultName})
		require.ErrorAs(t, err, &failed)
		var notFound *serviceerror.NamespaceNotFound
		_, err = e.operator.DeleteNamespace(ctx, &operatorservice.DeleteNamespaceRequest{Namespace: "missing"})
		require.ErrorAs(t, err, &notFound)
		_, err = e.registry.GetByName("shop")
		require.NoError(t, err, "nothing was deleted")
	})
}
