package frontend

import (
	"errors"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workerapipb "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/frontend/namespace"
)

// fuzzedRequests are the requests FuzzValidate decodes its input as (chosen by the first byte).
var fuzzedRequests = []func() proto.Message{
	func() proto.Message { return &workflowservice.RecordWorkerHeartbeatRequest{} },
	func() proto.Message { return &workflowservice.ShutdownWorkerRequest{} },
	func() proto.Message { return &workflowservice.StartActivityExecutionRequest{} },
	func() proto.Message { return &workflowservice.RespondActivityTaskFailedRequest{} },
	func() proto.Message { return &workflowservice.ListWorkersRequest{} },
	func() proto.Message { return &livenesspb.RecordHeartbeatRequest{} },
}

// FuzzValidate checks that request validation never panics, refuses only with
// InvalidArgument, and that a request it accepts holds nothing the server would mishandle:
// every duration and timestamp converts, every enum is known.
// `go test` runs only the seeds; fuzz with `go test -fuzz FuzzValidate ./frontend`.
func FuzzValidate(f *testing.F) {
	hb := &workerapipb.WorkerHeartbeat{WorkerInstanceKey: "w-1", ElapsedSinceLastHeartbeat: durationpb.New(time.Second)}
	for i, m := range []proto.Message{
		&workflowservice.RecordWorkerHeartbeatRequest{Namespace: "default", WorkerHeartbeat: []*workerapipb.WorkerHeartbeat{hb}},
		&workflowservice.ShutdownWorkerRequest{Namespace: "default", WorkerInstanceKey: "w-1"},
		&workflowservice.StartActivityExecutionRequest{
			Namespace: "default", ActivityId: "a", ActivityType: &commonpb.ActivityType{Name: "t"},
			TaskQueue: &taskqueuepb.TaskQueue{Name: "q"}, StartToCloseTimeout: durationpb.New(time.Minute),
		},
		&workflowservice.RespondActivityTaskFailedRequest{Namespace: "default", TaskToken: []byte{1}},
		&workflowservice.ListWorkersRequest{Namespace: "default", Query: `TaskQueue = "q"`},
		&livenesspb.RecordHeartbeatRequest{Namespace: "default", WorkerHeartbeat: hb, LeaseDuration: durationpb.New(time.Minute)},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append([]byte{byte(i)}, b...))
	}
	registry, err := namespace.NewRegistry(nil)
	if err != nil {
		f.Fatal(err)
	}
	v := newValidator(Deps{Namespaces: registry, DynamicConfig: dynamicconfig.NewNoopCollection()})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		m := fuzzedRequests[int(data[0])%len(fuzzedRequests)]()
		if proto.Unmarshal(data[1:], m) != nil {
			return // the codec refuses it before validation
		}
		err := v.validate(m)
		if err != nil {
			var invalid *serviceerror.InvalidArgument
			if !errors.As(err, &invalid) {
				t.Fatalf("validate(%v) = %T %v, want InvalidArgument", m, err, err)
			}
			return
		}
		if err := wellFormed(m.ProtoReflect()); err != nil {
			t.Fatalf("validate accepted %v, but it is not well formed: %v", m, err)
		}
	})
}

// FuzzPageToken checks that any bytes decode to a token or InvalidArgument, never a panic, and
// that a decoded token encodes back to one that decodes the same.
func FuzzPageToken(f *testing.F) {
	fp := fingerprint("default", `TaskQueue = "q"`)
	f.Add(encodePageToken(pageToken{Fingerprint: fp, After: "w-9", History: []byte{1, 2}}))
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		tok, err := decodePageToken(raw, fp)
		if err != nil {
			var invalid *serviceerror.InvalidArgument
			if !errors.As(err, &invalid) {
				t.Fatalf("decodePageToken(%q) = %T, want InvalidArgument", raw, err)
			}
			return
		}
		again, err := decodePageToken(encodePageToken(tok), fp)
		if err != nil {
			t.Fatalf("re-encoded token of %q does not decode: %v", raw, err)
		}
		if again.After != tok.After || string(again.History) != string(tok.History) {
			t.Fatalf("token of %q changed on a round trip: %+v, then %+v", raw, tok, again)
		}
	})
}
