package server

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.uber.org/fx"
	"google.golang.org/protobuf/types/known/timestamppb"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"

	"github.com/vigilhq/vigil/common/membership"
	"github.com/vigilhq/vigil/frontend"
	"github.com/vigilhq/vigil/history"
)

// clusterModule tells the membership where this host's frontend listens, before it registers,
// and makes a graceful stop hand the shards off first: its stop hook is appended after the
// frontend's, so it runs before every server stops. The others take the shards at once, and
// calls in flight here, SDKs' included, are rerouted to them instead of failing.
var clusterModule = fx.Invoke(func(lc fx.Lifecycle, m membership.Monitor, fs *frontend.Server, e *history.Engine, mode *history.StopMode) {
	sm, shared := m.(*history.StoreMonitor)
	if shared && m.Self().FrontendAddress == "" {
		sm.SetAddresses("", fs.Address())
	}
	lc.Append(fx.StopHook(func(ctx context.Context) {
		if !shared || mode.Crashed() {
			return
		}
		e.Stop()
		sm.Stop(ctx, true)
	}))
})

// ready is /readyz: this host is a member of its cluster and serves every shard assigned to
// it. A host fenced off or cut from the database is not ready.
func (s *Server) ready() error {
	if s.engine == nil {
		return errors.New("starting")
	}
	return s.engine.Ready()
}

// Engine is the history engine of this host (tests read its shards).
func (s *Server) Engine() *history.Engine { return s.engine }

// Crash stops the server as a crash would look to the other hosts of its cluster: it hands no
// shard off and does not leave the membership, so they take over only once its membership
// expires. In-process tests use it where a real process would be SIGKILLed.
func (s *Server) Crash() {
	s.stopMode.Crash()
	// Timers and renewals stop first, as in a crash; the servers then stop without handoff.
	s.engine.Abandon()
	if sm, ok := s.engine.Membership().(*history.StoreMonitor); ok {
		sm.Stop(context.Background(), false)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.Stop(ctx)
}

// clusterDescriber answers DescribeCluster from this host's engine.
type clusterDescriber Server

func (d *clusterDescriber) DescribeCluster(ctx context.Context) (*livenesspb.DescribeClusterResponse, error) {
	e := d.engine
	if e == nil {
		return nil, serviceerror.NewUnavailable("the server is starting")
	}
	hosts, unowned, err := e.DescribeCluster(ctx)
	if err != nil {
		return nil, err
	}
	self := e.Membership().Self()
	resp := &livenesspb.DescribeClusterResponse{NumShards: e.NumShards(), AnsweredBy: self.ID, UnownedShards: unowned}
	for _, h := range hosts {
		frontendAddress := h.FrontendAddress
		if frontendAddress == "" && h.ID == self.ID {
			frontendAddress = d.frontend.Address()
		}
		resp.Hosts = append(resp.Hosts, &livenesspb.ClusterHost{
			HostId:          h.ID,
			HistoryAddress:  h.HistoryAddress,
			FrontendAddress: frontendAddress,
			StartTime:       timestampOrNil(h.StartTime),
			LastRenewalTime: timestampOrNil(h.LastRenewal),
			ExpiryTime:      timestampOrNil(h.Expiry),
			Shards:          h.Shards,
		})
	}
	return resp, nil
}

func timestampOrNil(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
