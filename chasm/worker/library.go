package worker

import (
	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/chasm"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

// Library registers the Worker component and its tasks.
type Library struct {
	config      *Config
	rescheduler ActivityRescheduler
	brake       ExpiryBrake
	scope       tally.Scope
	logger      *zap.Logger
	// changes receives committed changes (WithChangeSink); nil: nobody watches.
	changes ChangeSink
	// counts keeps workers by state from committed changes (WithStateCounts); nil: none.
	counts *StateCounts
}

// WithChangeSink makes the library report every committed worker change to sink (the live
// view's hub). Call it before the library is registered.
func (l *Library) WithChangeSink(sink ChangeSink) *Library {
	l.changes = sink
	return l
}

// LibraryOption configures a Library.
type LibraryOption func(*Library)

// WithExpiryBrake lets brake hold lease expiries back (see Brake).
func WithExpiryBrake(brake ExpiryBrake) LibraryOption {
	return func(l *Library) { l.brake = brake }
}

// WithStateCounts makes the library count every committed change of state into counts
// (workers_by_state; see StateGauges.CountFrom).
func WithStateCounts(counts *StateCounts) LibraryOption {
	return func(l *Library) { l.counts = counts }
}

// NewLibrary returns the worker library. rescheduler delivers dead workers' activities to
// their shards.
func NewLibrary(config *Config, rescheduler ActivityRescheduler, scope tally.Scope, logger *zap.Logger, opts ...LibraryOption) *Library {
	l := &Library{config: config, rescheduler: rescheduler, scope: scope, logger: logger.With(zap.String("component", "worker"))}
	for _, opt := range opts {
		opt(l)
	}
	return l
}

// Name implements chasm.Library.
func (l *Library) Name() string { return LibraryName }

// Components implements chasm.Library.
func (l *Library) Components() []*chasm.RegistrableComponent {
	opts := []chasm.ComponentOption{
		chasm.WithCollections(BoundActivities.Name()),
		// Transitions replace the messages they change: a heartbeat copies no snapshot.
		chasm.WithCopyOnWrite(shallowCopy),
	}
	var observers []chasm.CommitObserver
	if l.changes != nil {
		observers = append(observers, commitObserver(l.changes))
	}
	if l.counts != nil {
		observers = append(observers, l.counts.observer())
	}
	if b, ok := l.brake.(*Brake); ok {
		observers = append(observers, b.observer()) // the share rule's leading indicator
	}
	switch len(observers) {
	case 0:
	case 1:
		opts = append(opts, chasm.WithCommitObserver(observers[0]))
	default:
		opts = append(opts, chasm.WithCommitObserver(func(c chasm.Commit) {
			for _, o := range observers {
				o(c)
			}
		}))
	}
	return []*chasm.RegistrableComponent{
		chasm.NewRegistrableComponent("worker",
			func(s *workerpb.WorkerState) *Worker { return &Worker{WorkerState: s} }, opts...),
	}
}

// Tasks implements chasm.Library.
func (l *Library) Tasks() []*chasm.RegistrableTask {
	leaseExpiryOpts := []chasm.TaskOption{chasm.WithSingletonTimer(), chasm.WithRestartGrace()}
	if gate, ok := l.brake.(bulkHold); ok {
		// While the host is behind every expiry is held: say so before loading each worker.
		leaseExpiryOpts = append(leaseExpiryOpts, chasm.WithGate(gate.HoldAll))
	}
	delivery := rescheduleDelivery{rescheduler: l.rescheduler, scope: l.scope, logger: l.logger}
	acks := newRescheduleAcks() // one worker's fan-outs and single batches share its writes
	return []*chasm.RegistrableTask{
		// One expiry timer per worker, replaced by every heartbeat; after a restart it waits
		// out history.leaseExpiryGraceAfterRestart, so an outage of the server is not taken for
		// the death of every worker.
		chasm.NewRegistrablePureTask("leaseExpiry",
			&LeaseExpiryTaskExecutor{config: l.config, brake: l.brake, scope: l.scope, logger: l.logger},
			leaseExpiryOpts...),
		chasm.NewRegistrablePureTask("cleanup",
			&WorkerCleanupTaskExecutor{config: l.config, scope: l.scope, logger: l.logger},
			chasm.WithSingletonTimer()),
		chasm.NewRegistrablePureTask("delete",
			&WorkerDeleteTaskExecutor{scope: l.scope, logger: l.logger},
			chasm.WithSingletonTimer()),
		// Handing activities back is background work: during a fleet restart it waits for
		// the restart's own calls (history.outboundYieldMax at most).
		chasm.NewRegistrableSideEffectTask("activityReschedule",
			&ActivityRescheduleTaskExecutor{delivery: delivery, acks: acks}, chasm.WithYieldToCalls()),
		chasm.NewRegistrableSideEffectTask("activityRescheduleFanOut",
			&ActivityRescheduleFanOutTaskExecutor{delivery: delivery, acks: acks, batchTimeout: rescheduleFanOutBatchTimeout},
			chasm.WithYieldToCalls()),
	}
}
