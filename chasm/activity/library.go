package activity

import (
	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/chasm"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
)

// Library registers the Activity component and its tasks.
type Library struct {
	config     *Config
	dispatcher Dispatcher
	binder     WorkerBinder
	sender     CommandSender
	scope      tally.Scope
	logger     *zap.Logger
}

// NewLibrary returns the activity library. dispatcher queues attempts in matching, binder
// binds started attempts to their worker's liveness record, sender delivers CancelActivity
// worker commands.
func NewLibrary(config *Config, dispatcher Dispatcher, binder WorkerBinder, sender CommandSender, scope tally.Scope, logger *zap.Logger) *Library {
	return &Library{
		config: config, dispatcher: dispatcher, binder: binder, sender: sender,
		scope: scope, logger: logger.With(zap.String("component", "activity")),
	}
}

// Name implements chasm.Library.
func (l *Library) Name() string { return LibraryName }

// Components implements chasm.Library.
func (l *Library) Components() []*chasm.RegistrableComponent {
	return []*chasm.RegistrableComponent{
		chasm.NewRegistrableComponent("activity",
			func(s *activitypb.ActivityState) *Activity { return &Activity{ActivityState: s} }),
	}
}

// Tasks implements chasm.Library.
func (l *Library) Tasks() []*chasm.RegistrableTask {
	return []*chasm.RegistrableTask{
		chasm.NewRegistrableSideEffectTask("dispatch",
			&DispatchTaskExecutor{dispatcher: l.dispatcher, config: l.config, scope: l.scope, logger: l.logger}),
		chasm.NewRegistrablePureTask("redispatch", &RedispatchTaskExecutor{}, chasm.WithSingletonTimer()),
		chasm.NewRegistrablePureTask("scheduleToStartTimeout",
			&ScheduleToStartTimeoutTaskExecutor{scope: l.scope, logger: l.logger}),
		chasm.NewRegistrablePureTask("startToCloseTimeout",
			&StartToCloseTimeoutTaskExecutor{scope: l.scope, logger: l.logger}),
		// One heartbeat timer per activity, replaced by every heartbeat.
		chasm.NewRegistrablePureTask("heartbeatTimeout",
			&HeartbeatTimeoutTaskExecutor{scope: l.scope, logger: l.logger}, chasm.WithSingletonTimer()),
		chasm.NewRegistrablePureTask("scheduleToCloseTimeout",
			&ScheduleToCloseTimeoutTaskExecutor{scope: l.scope, logger: l.logger}),
		chasm.NewRegistrableSideEffectTask("bind",
			&BindTaskExecutor{binder: l.binder, config: l.config, scope: l.scope, logger: l.logger}),
		chasm.NewRegistrablePureTask("rebind", &RebindTaskExecutor{}),
		chasm.NewRegistrableSideEffectTask("unbind",
			&UnbindTaskExecutor{binder: l.binder, logger: l.logger}),
		chasm.NewRegistrableSideEffectTask("cancelCommand",
			&CancelCommandTaskExecutor{sender: l.sender, config: l.config, scope: l.scope, logger: l.logger}),
	}
}
