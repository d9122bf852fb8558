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
