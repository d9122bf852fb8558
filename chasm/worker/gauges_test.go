package worker_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/chasm/worker"
)

func TestStateGaugesCountWorkersByState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mustBeat("w1")
	b.mustBeat("w2")
	b.mustBeat("w3")
	b.shutdown("w3")

	scope := tally.NewTestScope("", nil)
	g := worker.NewStateGauges(b.engine, b.engine.Registry(), func() []string { return []string{testNamespaceID, "other-ns"} },
		nil, b.engine.Clock(), scope, zap.NewNop())
	g.Report(context.Background())

	gauges := map[string]float64{}
	for _, gauge := range scope.Snapshot().Gauges() {
		gauges[gauge.Tags()["state"]] = gauge.Value()
	}
	require.Equal(t, map[string]float64{"ACTIVE": 2, "INACTIVE": 1, "CLEANED_UP": 0}, gauges)
}
