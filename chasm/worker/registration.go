package worker

import (
	"fmt"

	"github.com/uber-go/tally/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/common/quotas"
)

// registrationLimiter bounds how many new workers a host registers per second in a namespace
// (worker.registrationRPS): a fleet that crash-loops and mints a new key at each start costs a
// create each time, and must not crowd out the heartbeats of known workers, which it never
// limits. One token bucket per namespace, refilled at worker.registrationRPS and holding
// worker.registrationBurst: every SDK process start mints a new key, so a fleet's deploy is a
// burst of registrations, which the host's overload controller queues behind known workers
// rather than refuses; refused here, each would come back an interval later, and at 100,000
// workers the last of them registered two minutes after the first.
type registrationLimiter struct {
	rps        func(namespace string) float64
	burst      func(namespace string) int
	timeSource clock.TimeSource
	scope      tally.Scope

	buckets *quotas.KeyedLimiter
}

func newRegistrationLimiter(rps func(string) float64, burst func(string) int, timeSource clock.TimeSource, scope tally.Scope) *registrationLimiter {
	return &registrationLimiter{rps: rps, burst: burst, timeSource: timeSource, scope: scope, buckets: quotas.NewKeyedLimiter(0)}
}

// allow takes a token for a new worker of namespace, or returns ResourceExhausted.
func (l *registrationLimiter) allow(namespace string) error {
	if l == nil || l.rps == nil {
		return nil
	}
	rps, burst := l.rps(namespace), 0
	if l.burst != nil {
		burst = l.burst(namespace)
	}
	if l.buckets.AllowBurst(namespace, rps, burst, l.timeSource.Now()) {
		return nil
	}
	metrics.AbuseLimited.With(l.scope, metrics.KindTag("registration_rps")).Inc(1)
	return &serviceerror.ResourceExhausted{
		Cause: enumspb.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT,
		Scope: enumspb.RESOURCE_EXHAUSTED_SCOPE_NAMESPACE,
		Message: fmt.Sprintf("namespace %q registers more than %g new workers per second (worker.registrationRPS, worker.registrationBurst); "+
			"reuse the worker's instance key across restarts, or retry", namespace, rps),
	}
}
