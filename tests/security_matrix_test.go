package tests

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workerv1 "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/durationpb"

	adminpb "github.com/vigilhq/vigil/api/gen/adminpb/v1"
	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/frontend/auth"
	"github.com/vigilhq/vigil/tests/testcluster"
)

// matrixRequests are the requests of the calls that would change something, aimed at the
// worker and activity the test created; every other method gets {"namespace": "default"}.
var matrixRequests = map[string]string{
	"RecordWorkerHeartbeat":            `{"namespace":"default","workerHeartbeat":[{"workerInstanceKey":"w-1","workerIdentity":"hijack","taskQueue":"evil"}]}`,
	"ShutdownWorker":                   `{"namespace":"default","workerInstanceKey":"w-1","reason":"hijack"}`,
	"DrainWorker":                      `{"namespace":"default","workerInstanceKey":"w-1"}`,
	"RecordHeartbeat":                  `{"namespace":"default","workerHeartbeat":{"workerInstanceKey":"w-1","workerIdentity":"hijack"}}`,
	"StartActivityExecution":           `{"namespace":"default","activityId":"act-2","activityType":{"name":"x"},"taskQueue":{"name":"tq"},"startToCloseTimeout":"60s","requestId":"r2"}`,
	"RequestCancelActivityExecution":   `{"namespace":"default","activityId":"act-1","requestId":"c1"}`,
	"TerminateActivityExecution":       `{"namespace":"default","activityId":"act-1","reason":"hijack"}`,
	"DeleteActivityExecution":          `{"namespace":"default","activityId":"act-1"}`,
	"RespondActivityTaskCompletedById": `{"namespace":"default","activityId":"act-1"}`,
	"RespondActivityTaskFailedById":    `{"namespace":"default","activityId":"act-1"}`,
	"RespondActivityTaskCanceledById":  `{"namespace":"default","activityId":"act-1"}`,
	"CreateAPIKey":                     `{"namespace":"default","roles":"admin"}`,
	"RevokeAPIKey":                     `{"namespace":"default","id":"0000000000000000"}`,
	"GetSystemInfo":                    `{}`,
	"ListNamespaces":                   `{}`,
	"RotateTaskTokenKey":               `{}`,
}

// TestSecurity_Matrix calls every public method as each kind of principal and checks the code;
// afterwards the worker and the activity read back unchanged.
func TestSecurity_Matrix(t *testing.T) {
	dir := t.TempDir()
	jwksPath := filepath.Join(dir, "jwks.json")
	signer, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	forger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	x, y := make([]byte, 32), make([]byte, 32)
	signer.X.FillBytes(x)
	signer.Y.FillBytes(y)
	jwks, err := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "EC", "crv": "P-256", "kid": "k1",
		"x": base64.RawURLEncoding.EncodeToString(x), "y": base64.RawURLEncoding.EncodeToString(y)}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(jwksPath, jwks, 0o600))
	jwtFor := func(key *ecdsa.PrivateKey, exp time.Time, perms ...string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"sub": "someone", "exp": exp.Unix(), "permissions": perms})
		tok.Header["kid"] = "k1"
		s, err := tok.SignedString(key)
		require.NoError(t, err)
		return s
	}

	cluster := testcluster.New(t, testcluster.Options{
		Namespaces: []string{"other"},
		Auth:       auth.Config{Enabled: true, AdminAPIKey: testAdminKey, JWT: auth.JWTConfig{JWKSFile: jwksPath}},
	})
	conn := func(key string) *grpc.ClientConn {
		c, err := grpc.NewClient(cluster.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()), bearer(key))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	admin := conn(testAdminKey)
	ctx := context.Background()

	// The state denied calls must not touch: a worker (owned by ownerKey's principal) and a
	// scheduled activity.
	live := livenesspb.NewWorkerLivenessServiceClient(admin)
	ownerKey, _ := createAPIKey(t, admin, "default", "worker")
	_, err = livenesspb.NewWorkerLivenessServiceClient(conn(ownerKey)).RecordHeartbeat(ctx, &livenesspb.RecordHeartbeatRequest{Namespace: "default",
		WorkerHeartbeat: &workerv1.WorkerHeartbeat{WorkerInstanceKey: "w-1", WorkerIdentity: "owner", TaskQueue: "tq"},
		LeaseDuration:   durationpb.New(10 * time.Minute)})
	require.NoError(t, err)
	wf := workflowservice.NewWorkflowServiceClient(admin)
	_, err = wf.StartActivityExecution(ctx, &workflowservice.StartActivityExecutionRequest{Namespace: "default", ActivityId: "act-1",
		ActivityType: &commonpb.ActivityType{Name: "x"}, TaskQueue: &taskqueuepb.TaskQueue{Name: "tq"}, StartToCloseTimeout: durationpb.New(time.Minute), RequestId: "r1"})
	require.NoError(t, err)
	snapshot := func() (*livenesspb.WorkerLiveness, *workflowservice.DescribeActivityExecutionResponse) {
		w, err := live.DescribeWorkerLiveness(ctx, &livenesspb.DescribeWorkerLivenessRequest{Namespace: "default", WorkerInstanceKey: "w-1"})
		require.NoError(t, err)
		a, err := wf.DescribeActivityExecution(ctx, &workflowservice.DescribeActivityExecutionRequest{Namespace: "default", ActivityId: "act-1"})
		require.NoError(t, err)
		return w.GetWorker(), a
	}
	// The hand-off to matching is the server's own transition (it clears the next attempt's
	// schedule time and counts a transition); wait for it so the snapshot holds still.
	require.Eventually(t, func() bool {
		_, a := snapshot()
		return a.GetInfo().GetNextAttemptScheduleTime() == nil
	}, 30*time.Second, 10*time.Millisecond, "the activity never reached matching")
	workerBefore, activityBefore := snapshot()

	revokedKey, revokedID := createAPIKey(t, admin, "default", "worker,reader,writer,admin")
	_, err = adminpb.NewAdminServiceClient(admin).RevokeAPIKey(ctx, &adminpb.RevokeAPIKeyRequest{Id: revokedID})
	require.NoError(t, err)
	otherNamespace, _ := createAPIKey(t, admin, "other", "worker,reader,writer,admin")
	roleKeys := map[auth.Role]string{}
	for _, r := range []auth.Role{auth.RoleWorker, auth.RoleReader, auth.RoleWriter, auth.RoleAdmin} {
		roleKeys[r], _ = createAPIKey(t, admin, "default", r.String())
	}
	// wrongRole is a role that does not cover the needed one.
	wrongRole := map[auth.Role]auth.Role{auth.RoleWorker: auth.RoleReader, auth.RoleReader: auth.RoleWorker, auth.RoleWriter: auth.RoleReader, auth.RoleAdmin: auth.RoleWriter}

	type principal struct {
		name string
		key  func(auth.Access) string
		want codes.Code
	}
	denied := []principal{
		{"None", func(auth.Access) string { return "" }, codes.Unauthenticated},
		{"BadSignature", func(auth.Access) string { return jwtFor(forger, time.Now().Add(time.Hour), "default:admin") }, codes.Unauthenticated},
		{"ExpiredJWT", func(auth.Access) string { return jwtFor(signer, time.Now().Add(-time.Hour), "default:admin") }, codes.Unauthenticated},
		{"RevokedKey", func(auth.Access) string { return revokedKey }, codes.Unauthenticated},
		{"WrongNamespace", func(auth.Access) string { return otherNamespace }, codes.PermissionDenied},
		{"WrongRole", func(a auth.Access) string { return roleKeys[wrongRole[a.Role]] }, codes.PermissionDenied},
	}
	conns := map[string]*grpc.ClientConn{}
	call := func(t *testing.T, method, key string) error {
		c, ok := conns[key]
		if !ok {
			c = conn(key)
			conns[key] = c
		}
		svc, name := splitMethod(method)
		sd, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
		require.NoError(t, err, method)
		md := sd.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(name))
		require.NotNil(t, md, method)
		req := dynamicpb.NewMessage(md.Input())
		body, ok := matrixRequests[name]
		if !ok {
			body = `{"namespace":"default"}`
		}
		require.NoError(t, protojson.Unmarshal([]byte(body), req), method)
		callCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return c.Invoke(callCtx, method, req, dynamicpb.NewMessage(md.Output()))
	}

	var methods []string
	for m := range auth.MethodAccess {
		if !strings.HasPrefix(m, "/grpc.health") { // anonymous: checked below
			methods = append(methods, m)
		}
	}
	sort.Strings(methods)
	for _, p := range denied {
		t.Run(p.name, func(t *testing.T) {
			for _, m := range methods {
				access := auth.MethodAccess[m]
				_, name := splitMethod(m)
				if p.want == codes.PermissionDenied && access.Role == auth.RoleNone && (name == "GetSystemInfo" || name == "ListNamespaces" || p.name == "WrongRole") {
					continue // any authenticated principal may call it
				}
				err := call(t, m, p.key(access))
				require.Equal(t, p.want, status.Code(err), "%s as %s: %v", m, p.name, err)
			}
		})
	}
	t.Run("OtherWorkersPrincipal", func(t *testing.T) {
		// A worker-role principal of the namespace, but not the one that owns w-1.
		for _, name := range []string{"RecordWorkerHeartbeat", "ShutdownWorker"} {
			err := call(t, "/temporal.api.workflowservice.v1.WorkflowService/"+name, roleKeys[auth.RoleWorker])
			require.Equal(t, codes.PermissionDenied, status.Code(err), "%s: %v", name, err)
		}
		err := call(t, "/vigil.api.liveness.v1.WorkerLivenessService/RecordHeartbeat", roleKeys[auth.RoleWorker])
		require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	})
	workerAfter, activityAfter := snapshot()
	require.True(t, proto.Equal(workerBefore, workerAfter), "denied calls changed the worker:\n%v\n%v", workerBefore, workerAfter)
	require.True(t, proto.Equal(activityBefore, activityAfter), "denied calls changed the activity:\n%v\n%v", activityBefore, activityAfter)

	t.Run("HealthNeedsNoCredentials", func(t *testing.T) {
		resp, err := healthpb.NewHealthClient(conn("")).Check(ctx, &healthpb.HealthCheckRequest{Service: "temporal.api.workflowservice.v1.WorkflowService"})
		require.NoError(t, err)
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
	})
	t.Run("Valid", func(t *testing.T) {
		for _, m := range methods {
			access := auth.MethodAccess[m]
			key := roleKeys[access.Role]
			if access.Role == auth.RoleWorker {
				key = ownerKey // w-1's owner
			}
			if access.Role == auth.RoleNone {
				key = roleKeys[auth.RoleReader]
			}
			if _, name := splitMethod(m); name == "RotateTaskTokenKey" || access.System {
				key = testAdminKey // a cluster-wide call: admin of every namespace
			}
			code := status.Code(call(t, m, key))
			require.NotContains(t, []codes.Code{codes.Unauthenticated, codes.PermissionDenied}, code, m)
		}
	})
}

func splitMethod(full string) (service, method string) {
	full = strings.TrimPrefix(full, "/")
	i := strings.LastIndexByte(full, '/')
	return full[:i], full[i+1:]
}
