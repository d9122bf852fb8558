package server

import (
	"context"
	"errors"
	"time"

	"go.uber.org/fx"

	"github.com/vigilhq/vigil/common/membership"
	"github.com/vigilhq/vigil/frontend"
	"github.com/vigilhq/vigil/history"
)

// clusterModule tells the membership where this host's frontend listens, before it registers.
var clusterModule = fx.Invoke(func(m membership.Monitor, fs *frontend.Server) {
	if sm, ok := m.(*history.StoreMonitor); ok && m.Self().FrontendAddress == "" {
		sm.SetAddresses("", fs.Address())
	}
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.Stop(ctx)
}
