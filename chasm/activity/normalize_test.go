package activity

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/protobuf/types/known/durationpb"

	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
)

func TestNormalizeStartTimeouts(t *testing.T) {
	t.Parallel()
	d := durationpb.New
	type want struct{ s2c, s2s, st2c, hb time.Duration }
	for _, tc := range []struct {
		name                string
		s2c, s2s, st2c, hb  *durationpb.Duration
		want                want
		wantInvalidArgument string
	}{
		{name: "StartToCloseOnlyLeavesTheOthersUnlimited", st2c: d(time.Minute),
			want: want{st2c: time.Minute}},
		{name: "ScheduleToCloseOnlyFillsStartToCloseAndScheduleToStart", s2c: d(time.Hour),
			want: want{s2c: time.Hour, s2s: time.Hour, st2c: time.Hour}},
		{name: "StartToCloseIsCappedByScheduleToClose", s2c: d(time.Minute), st2c: d(time.Hour),
			want: want{s2c: time.Minute, s2s: time.Minute, st2c: time.Minute}},
		{name: "ScheduleToStartIsCappedByScheduleToClose", s2c: d(time.Minute), s2s: d(time.Hour), st2c: d(time.Second),
			want: want{s2c: time.Minute, s2s: time.Minute, st2c: time.Second}},
		{name: "ShorterTimeoutsAreKept", s2c: d(time.Hour), s2s: d(time.Minute), st2c: d(10 * time.Minute), hb: d(time.Second),
			want: want{s2c: time.Hour, s2s: time.Minute, st2c: 10 * time.Minute, hb: time.Second}},
		{name: "HeartbeatIsCappedByStartToClose", st2c: d(time.Second), hb: d(time.Minute),
			want: want{st2c: time.Second, hb: time.Second}},
		{name: "ScheduleToStartWithoutScheduleToCloseIsKept", s2s: d(time.Minute), st2c: d(time.Second),
			want: want{s2s: time.Minute, st2c: time.Second}},
		{name: "ZeroMeansUnset", s2c: d(0), s2s: d(0), st2c: d(time.Second), hb: d(0),
			want: want{st2c: time.Second}},
		{name: "NeitherCloseTimeoutIsRefused", s2s: d(time.Minute), hb: d(time.Second),
			wantInvalidArgument: "schedule_to_close_timeout or start_to_close_timeout must be set"},
		{name: "NegativeIsRefused", st2c: d(time.Second), hb: d(-time.Second),
			wantInvalidArgument: "heartbeat_timeout must be a valid, non-negative duration"},
		{name: "InvalidIsRefused", st2c: &durationpb.Duration{Seconds: 1, Nanos: -5},
			wantInvalidArgument: "start_to_close_timeout must be a valid, non-negative duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := &activitypb.StartActivityRequest{
				NamespaceId: "ns-id", Namespace: "ns", ActivityId: "a", TaskQueue: "q",
				ActivityType:           &commonpb.ActivityType{Name: "T"},
				ScheduleToCloseTimeout: tc.s2c, ScheduleToStartTimeout: tc.s2s,
				StartToCloseTimeout: tc.st2c, HeartbeatTimeout: tc.hb,
			}
			out, _, err := normalizeStart(req)
			if tc.wantInvalidArgument != "" {
				var invalid *serviceerror.InvalidArgument
				require.ErrorAs(t, err, &invalid)
				require.Contains(t, err.Error(), tc.wantInvalidArgument)
				return
			}
			require.NoError(t, err)
			// Every timeout is present, as the activity task must carry it to the worker.
			for _, got := range []*durationpb.Duration{out.GetScheduleToCloseTimeout(), out.GetScheduleToStartTimeout(),
				out.GetStartToCloseTimeout(), out.GetHeartbeatTimeout()} {
				require.NotNil(t, got)
			}
			require.Equal(t, tc.want, want{
				s2c:  out.GetScheduleToCloseTimeout().AsDuration(),
				s2s:  out.GetScheduleToStartTimeout().AsDuration(),
				st2c: out.GetStartToCloseTimeout().AsDuration(),
				hb:   out.GetHeartbeatTimeout().AsDuration(),
			})
			// The request itself is left as the client sent it.
			require.Same(t, tc.s2c, req.ScheduleToCloseTimeout)
		})
	}
}

func TestNormalizeStartRetryPolicyDefaults(t *testing.T) {
	t.Parallel()
	out, _, err := normalizeStart(&activitypb.StartActivityRequest{
		NamespaceId: "ns-id", Namespace: "ns", ActivityId: "a", TaskQueue: "q",
		ActivityType:        &commonpb.ActivityType{Name: "T"},
		StartToCloseTimeout: durationpb.New(time.Minute),
	})
	require.NoError(t, err)
	p := out.GetRetryPolicy()
	require.Equal(t, time.Second, p.GetInitialInterval().AsDuration())
	require.Equal(t, 2.0, p.GetBackoffCoefficient())
	require.Equal(t, 100*time.Second, p.GetMaximumInterval().AsDuration())
	require.Zero(t, p.GetMaximumAttempts(), "unlimited attempts")
}

func TestActivityTaskCarriesEveryTimeout(t *testing.T) {
	t.Parallel()
	// State written without a schedule-to-close timeout still reaches the worker with one.
	resp := ToPollActivityTaskQueueResponse(&activitypb.RecordActivityTaskStartedResponse{
		StartToCloseTimeout: durationpb.New(time.Minute),
	})
	require.NotNil(t, resp.GetScheduleToCloseTimeout())
	require.Zero(t, resp.GetScheduleToCloseTimeout().AsDuration())
	require.NotNil(t, resp.GetHeartbeatTimeout())
	require.Equal(t, time.Minute, resp.GetStartToCloseTimeout().AsDuration())
}
