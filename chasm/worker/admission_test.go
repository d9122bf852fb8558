package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/overload"
)

// classAdmitter records the class of every call, refusing those refuse says to.
type classAdmitter struct {
	mu      sync.Mutex
	classes []overload.Class
	refuse  bool
}

func (a *classAdmitter) Admit(_ context.Context, _ int32, class overload.Class, _ int) (func(), error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.classes = append(a.classes, class)
	if a.refuse {
		return nil, serviceerror.NewResourceExhausted(0, "behind")
	}
	return func() {}, nil
}

func (a *classAdmitter) last() overload.Class {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.classes[len(a.classes)-1]
}

func TestHeartbeatClass(t *testing.T) {
	t.Parallel()

	t.Run("ARefusedRegistrationRetriesAsARegistration", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		admitter := &classAdmitter{refuse: true}
		b.handler = worker.NewHandler(b.engine, b.config, b.engine.Clock(), tally.NoopScope, zap.NewNop(), worker.WithAdmission(admitter))

		r := b.beat("new")
		require.NotNil(t, r.Error)
		require.Equal(t, overload.ClassRegistration, admitter.last())
		// The SDK reports the interval since its refused beat: still a registration.
		require.NotNil(t, b.beat("new", withElapsed(time.Second)).Error)
		require.Equal(t, overload.ClassRegistration, admitter.last())

		admitter.refuse = false
		b.mustBeat("new", withElapsed(time.Second))
		require.Equal(t, overload.ClassRegistration, admitter.last())
		b.mustBeat("new", withElapsed(time.Second))
		require.Equal(t, overload.ClassHeartbeat, admitter.last(), "registered: a known worker now")
	})

	t.Run("AWorkerThatHeartbeatedBeforeIsKnownAfterARestart", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		admitter := &classAdmitter{}
		b.handler = worker.NewHandler(b.engine, b.config, b.engine.Clock(), tally.NoopScope, zap.NewNop(), worker.WithAdmission(admitter))

		b.mustBeat("old", withElapsed(10*time.Second))
		require.Equal(t, overload.ClassHeartbeat, admitter.last(), "this host never saw it, but it says it beat before")
		b.mustBeat("fresh")
		require.Equal(t, overload.ClassRegistration, admitter.last())
	})
}

// canceledAdmitter answers every call as the host's admission does once the call's context is
// canceled while it waits for a slot.
type canceledAdmitter struct{}

func (canceledAdmitter) Admit(ctx context.Context, _ int32, _ overload.Class, _ int) (func(), error) {
	<-ctx.Done()
	return nil, serviceerror.NewCanceled("the caller went away before history served the call")
}

// A heartbeat whose call's context is canceled inside the server (the history router takes a
// call back from an owner that stopped answering) is answered Unavailable, which the router
// and the SDKs retry, and never Canceled, which no SDK retries. A request whose every
// heartbeat was canceled so fails as a whole, and the router sends it to the shard's next owner.
func TestCanceledHeartbeatIsUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.handler = worker.NewHandler(b.engine, b.config, b.engine.Clock(), tally.NoopScope, zap.NewNop(), worker.WithAdmission(canceledAdmitter{}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := b.handler.RecordHeartbeats(ctx, &workerpb.RecordHeartbeatsRequest{
		NamespaceId: testNamespaceID, Namespace: testNamespace,
		Heartbeats: []*workerpb.HeartbeatEntry{{Heartbeat: heartbeat("w1")}, {Heartbeat: heartbeat("w2")}},
	})
	var unavailable *serviceerror.Unavailable
	require.ErrorAs(t, err, &unavailable, "got %v", err)
}
