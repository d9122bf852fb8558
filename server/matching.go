package server

import (
	"github.com/uber-go/tally/v4"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/membership"
	"github.com/vigilhq/vigil/history"
	matchingpb "github.com/vigilhq/vigil/matching/gen/matchingpb/v1"

	"github.com/vigilhq/vigil/matching"
)

// matchingModule runs this host's share of matching: the in-process Matcher (the queues this
// host owns), the MatchingService that serves it to the other hosts on the history gRPC
// server, and the routing *matching.Client that everything else calls. It needs a
// membership.Monitor.
var matchingModule = fx.Options(
	fx.Provide(
		func(lc fx.Lifecycle, ts clock.TimeSource, logger *zap.Logger, scope tally.Scope) *matching.Matcher {
			m := matching.New(ts, matching.Options{}, logger, scope.SubScope("matching"))
			lc.Append(fx.StartStopHook(m.Start, m.Stop))
			return m
		},
		func(lc fx.Lifecycle, m *matching.Matcher, monitor membership.Monitor, logger *zap.Logger, scope tally.Scope) *matching.Client {
			c := matching.NewClient(m, monitor, matching.ClientOptions{Logger: logger, Scope: scope.SubScope("matching")})
			// Appended after the matcher's hooks: started after it, stopped before it.
			lc.Append(fx.StartStopHook(c.Start, c.Stop))
			return c
		},
		history.AsService(func(m *matching.Matcher) history.ServiceRegistration {
			s := matching.NewService(m)
			return func(r grpc.ServiceRegistrar) { matchingpb.RegisterMatchingServiceServer(r, s) }
		}),
	),
)
