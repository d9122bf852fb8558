package dynamicconfig

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The keys are part of vigil's operator-facing contract: renaming one silently drops every
// override of it.
func TestDeclaredKeysAndDefaults(t *testing.T) {
	t.Parallel()

	type declared interface {
		Key() Key
		Description() string
	}
	tests := []struct {
		setting declared
		key     Key
		def     any
	}{
		{InactiveWorkerCleanupDelay, "matching.InactiveWorkerCleanupDelay", 60 * time.Minute},
		{DefaultLeaseDuration, "worker.defaultLeaseDuration", 3 * time.Minute},
		{CleanedUpWorkerRetention, "worker.cleanedUpRetention", 24 * time.Hour},
		{MinLeaseDuration, "worker.minLeaseDuration", time.Second},
		{MaxLeaseDuration, "worker.maxLeaseDuration", 10 * time.Minute},
		{MaxBindingsPerWorker, "worker.maxBindingsPerWorker", 100000},
		{LeaseExpiryGraceAfterRestart, "history.leaseExpiryGraceAfterRestart", 30 * time.Second},
		{GroupCommitMaxBatchSize, "history.groupCommitMaxBatchSize", 256},
		{GroupCommitMaxWait, "history.groupCommitMaxWait", time.Duration(0)},
		{TimerLookAheadDuration, "history.timerLookAheadDuration", time.Minute},
		{TimerLookAheadPageSize, "history.timerLookAheadPageSize", 1000},
		{OutboundMaxAttemptsBeforeAlert, "history.outboundMaxAttemptsBeforeAlert", 20},
		{OutboundYieldMax, "history.outboundYieldMax", time.Second},
		{OutboundRetryInitialInterval, "history.outboundRetryInitialInterval", 100 * time.Millisecond},
		{OutboundRetryMaxInterval, "history.outboundRetryMaxInterval", 30 * time.Second},
		{NamespaceRPS, "frontend.namespaceRPS", 10000.0},
		{PrincipalRPS, "frontend.principalRPS", 0.0},
		{MaxConcurrentLongPolls, "frontend.maxConcurrentLongPolls", 25000},
		{WorkerRegistrationRPS, "worker.registrationRPS", 1000.0},
		{WorkerRegistrationBurst, "worker.registrationBurst", 100_000},
		{AdmissionMaxInFlightPerShard, "history.admissionMaxInFlightPerShard", 32},
		{AdmissionMinInFlightPerShard, "history.admissionMinInFlightPerShard", 2},
		{AdmissionTargetLatency, "history.admissionTargetLatency", 200 * time.Millisecond},
		{AdmissionMaxQueueDelay, "history.admissionMaxQueueDelay", 2 * time.Second},
		{AdmissionHeartbeatMaxQueueDelay, "history.admissionHeartbeatMaxQueueDelay", 10 * time.Second},
		{ExpiryBrakeRefusedShare, "history.expiryBrakeRefusedShare", 0.01},
		{AdmissionMaxQueued, "history.admissionMaxQueued", 20000},
		{AdmissionMaxQueuedBytes, "history.admissionMaxQueuedBytes", 64 << 20},
		{ExpiryBrakeQueueDelay, "history.expiryBrakeQueueDelay", 2 * time.Second},
		{ExpiryBrakeCooldown, "history.expiryBrakeCooldown", 15 * time.Second},
		{ExpiryBrakeRecheck, "history.expiryBrakeRecheck", 2 * time.Second},
		{ExpiryBrakeThreshold, "worker.expiryBrakeThreshold", 0.55},
		{ExpiryBrakeWindow, "worker.expiryBrakeWindow", 30 * time.Second},
		{ExpiryBrakeMinExpiries, "worker.expiryBrakeMinExpiries", 10},
		{ExpiryBrakeSecondaryRate, "worker.expiryBrakeSecondaryRate", 0.1},
	}
	for _, tt := range tests {
		t.Run(tt.key.String(), func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.key, tt.setting.Key())
			require.NotEmpty(t, tt.setting.Description())
			require.Equal(t, tt.def, defaultOf(tt.setting))
		})
	}
}

func defaultOf(s any) any {
	switch s := s.(type) {
	case NamespaceDurationSetting:
		return s.Default()
	case NamespaceIntSetting:
		return s.Default()
	case NamespaceFloatSetting:
		return s.Default()
	case GlobalDurationSetting:
		return s.Default()
	case GlobalIntSetting:
		return s.Default()
	case GlobalFloatSetting:
		return s.Default()
	default:
		return nil
	}
}

func TestDeclaredDocumentsTypeDefaultAndScope(t *testing.T) {
	var found bool
	for _, d := range Declared() {
		if d.Key == InactiveWorkerCleanupDelay.Key() {
			found = true
			require.Equal(t, SettingDoc{Key: d.Key, Type: "duration", Scope: "namespace", Default: "1h",
				Description: InactiveWorkerCleanupDelay.Description()}, d)
		}
	}
	require.True(t, found, "InactiveWorkerCleanupDelay is not in Declared()")
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Hour: "1h", 3 * time.Minute: "3m", 90 * time.Second: "1m30s", 500 * time.Millisecond: "500ms",
		0: "0s", 90 * time.Minute: "1h30m", 25 * time.Hour: "25h",
	} {
		require.Equal(t, want, formatDuration(d), d)
	}
}
