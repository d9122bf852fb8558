package tasks

import "go.uber.org/fx"

// Module provides the host's task Scheduler. It starts before the queues that use it and stops
// after them, as fx orders hooks by dependency.
var Module = fx.Module("tasks",
	fx.Provide(func(lc fx.Lifecycle) *Scheduler {
		s := NewScheduler(SchedulerOptions{})
		lc.Append(fx.StartStopHook(s.Start, s.Stop))
		return s
	}),
)
