package chasm

import (
	"go.uber.org/fx"
	"google.golang.org/grpc"
)

// What a history host offers the libraries it serves. The host (package history) implements
// these and provides them through fx; a library's module asks for them, so that no library
// imports the host.

// ServiceRegistration registers one library's history gRPC service on the host's server.
type ServiceRegistration func(grpc.ServiceRegistrar)

// ServiceGroup is the fx value group of the ServiceRegistration values a host serves.
const ServiceGroup = "history.services"

// AsService annotates a constructor of a ServiceRegistration for ServiceGroup.
func AsService(constructor any) any {
	return fx.Annotate(constructor, fx.ResultTags(`group:"`+ServiceGroup+`"`))
}

// ShardConnector reaches the history host that owns a shard, wherever it runs: a library's
// side-effect tasks call other shards through it.
type ShardConnector interface {
	// ConnForShard returns a connection to the shard's owner (this host's own server when it
	// owns the shard).
	ConnForShard(shardID int32) (grpc.ClientConnInterface, error)
	// ConnFor returns a connection to the owner of the business ID's shard.
	ConnFor(namespaceID, businessID string) (grpc.ClientConnInterface, error)
}

// ShardCount is the cluster's number of shards, fixed at its first start.
type ShardCount int32

// ByReference is a call option for a call that a history host may serve in process (the
// host's own shards): the request is handed to the handler, and the handler's reply back to
// the caller, as they are instead of as copies. It saves a deep copy of each message both ways,
// which on the heartbeat path costs more than the handler's own work outside the commit.
//
// Pass it only where both sides keep the promise it stands for: the caller changes neither the
// request (during or after the call) nor the reply, and the method's handler changes its
// request in no way (it may keep messages of it, which nobody changes) and keeps no reference
// to its reply once it has returned. Over the network it changes nothing.
var ByReference grpc.CallOption = ByReferenceOption{}

// ByReferenceOption is the type of ByReference, for a host to recognize it.
type ByReferenceOption struct{ grpc.EmptyCallOption }

// Resendable is a call option for a call whose second delivery does what the first did: the
// method is a read, or applying it again changes nothing more (a heartbeat extends the same
// lease; a start, pause or reset carries a request ID the handler deduplicates). When a shard's
// owner stops answering and the shard moves, the host sends a Resendable call to the next
// owner; any other call, whose first delivery may have committed, is answered Unavailable.
var Resendable grpc.CallOption = ResendableOption{}

// ResendableOption is the type of Resendable, for a host to recognize it.
type ResendableOption struct{ grpc.EmptyCallOption }
