package activity

import (
	"google.golang.org/protobuf/types/known/durationpb"
)

// timeouts are an activity's four timeouts after Temporal's normalization. Every field is set:
// an unset timeout is a zero duration, never nil, because the activity task carries them to the
// worker and sdk-core (the TypeScript, Python, .NET and Ruby SDKs) refuses a task whose
// schedule_to_close_timeout is absent.
type timeouts struct {
	scheduleToClose, scheduleToStart, startToClose, heartbeat *durationpb.Duration
}

// normalizeTimeouts applies the rules Temporal applies to a standalone activity's timeouts, at
// start and at UpdateActivityExecutionOptions alike:
//   - each must be a valid, non-negative duration; zero means unset;
//   - schedule-to-close or start-to-close must be set;
//   - with schedule-to-close set, start-to-close and schedule-to-start default to it and are
//     capped by it;
//   - with only start-to-close set, schedule-to-close and schedule-to-start stay unlimited
//     (zero): a standalone activity has no run timeout to inherit;
//   - the heartbeat timeout is capped by start-to-close.
func normalizeTimeouts(s2c, s2s, st2c, hb *durationpb.Duration) (timeouts, error) {
	for _, d := range []struct {
		name string
		d    *durationpb.Duration
	}{
		{"schedule_to_close_timeout", s2c},
		{"schedule_to_start_timeout", s2s},
		{"start_to_close_timeout", st2c},
		{"heartbeat_timeout", hb},
	} {
		if d.d != nil && (d.d.CheckValid() != nil || d.d.AsDuration() < 0) {
			return timeouts{}, invalidArgument("%s must be a valid, non-negative duration", d.name)
		}
	}
	scheduleToClose := s2c.AsDuration()
	scheduleToStart := s2s.AsDuration()
	startToClose := st2c.AsDuration()
	heartbeat := hb.AsDuration()
	if scheduleToClose <= 0 && startToClose <= 0 {
		return timeouts{}, invalidArgument("schedule_to_close_timeout or start_to_close_timeout must be set")
	}
	if scheduleToClose > 0 {
		if startToClose <= 0 || startToClose > scheduleToClose {
			startToClose = scheduleToClose
		}
		if scheduleToStart <= 0 || scheduleToStart > scheduleToClose {
			scheduleToStart = scheduleToClose
		}
	}
	return timeouts{
		scheduleToClose: durationpb.New(scheduleToClose),
		scheduleToStart: durationpb.New(scheduleToStart),
		startToClose:    durationpb.New(startToClose),
		heartbeat:       durationpb.New(min(heartbeat, startToClose)),
	}, nil
}

// wireDuration is a timeout as the public API carries it: zero, not absent, when unset. The
// state of an activity may hold nil for an unset timeout (older versions of vigil stored it so).
func wireDuration(d *durationpb.Duration) *durationpb.Duration {
	if d == nil {
		return durationpb.New(0)
	}
	return d
}
