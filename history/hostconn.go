package history

import (
	"fmt"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// ConnForHost returns a connection to the history server at address (a member's
// HistoryAddress), for calls that go to one host rather than to a shard's owner: the live
// view's WatchChanges streams. It shares the router's connections and sends the cluster
// secret, as calls routed by shard do.
func (r *Router) ConnForHost(address string) (grpc.ClientConnInterface, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if conn, ok := r.conns[address]; ok {
		return conn, nil
	}
	conn, err := grpc.NewClient(r.dial(address), append(clusterSecretDialOptions(r.secret),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(statusToServiceErrorInterceptor))...)
	if err != nil {
		return nil, serviceerror.NewUnavailable(fmt.Sprintf("dial history host %s: %v", address, err))
	}
	r.conns[address] = conn
	return conn, nil
}
