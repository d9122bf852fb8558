package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
)

func TestLeaseColumnShowsASuspectWorker(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	w := &livenesspb.WorkerLiveness{
		State:         livenesspb.LivenessState_LIVENESS_STATE_ACTIVE,
		LeaseDeadline: timestamppb.New(now.Add(time.Minute)),
	}
	require.Equal(t, "expires in 1m0s", leaseColumn(w, now))
	w.SuspectSince = timestamppb.New(now.Add(-200 * time.Millisecond))
	w.SuspectReason = "connection closed"
	w.SuspectDeadline = timestamppb.New(now.Add(300 * time.Millisecond))
	require.Equal(t, "SUSPECT (connection closed 200ms ago), expires in 300ms", leaseColumn(w, now))
	w = &livenesspb.WorkerLiveness{
		State: livenesspb.LivenessState_LIVENESS_STATE_INACTIVE, InactiveReason: livenesspb.InactiveReason_INACTIVE_REASON_CONNECTION_LOST,
		InactiveTime: timestamppb.New(now.Add(-3 * time.Second)),
	}
	require.Equal(t, "connection_lost 3s ago", leaseColumn(w, now))
}
