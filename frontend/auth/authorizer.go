package auth

import (
	"context"
	"fmt"
)

// Decision is an Authorizer's verdict.
type Decision int

const (
	DecisionDeny Decision = iota
	DecisionAllow
)

// Result is an Authorizer's answer; Reason says why a call is denied (sent to the caller and
// logged, so it must hold no secret).
type Result struct {
	Decision Decision
	Reason   string
}

// CallTarget is the call being authorized.
type CallTarget struct {
	// APIName is the full gRPC method, "/package.Service/Method".
	APIName string
	// Namespace is the request's namespace field ("" when it has none).
	Namespace string
	// Request is the decoded request message (nil for streams before their first message).
	Request any
}

// Authorizer decides whether a principal may make a call. Temporal's server has the same
// interface; the default (NewDefaultAuthorizer) checks the method's role in the namespace.
type Authorizer interface {
	// Authorize is called once per call before the handler runs. claims is nil for a caller
	// that presented no credentials. A returned error is logged and the call refused
	// (Unavailable: the authorizer itself failed).
	Authorize(ctx context.Context, claims *Claims, target *CallTarget) (Result, error)
}

// Access says what a method needs.
type Access struct {
	// Role is what the principal needs in the request's namespace; RoleNone means only
	// authentication. A method of a request without a namespace needs Role in every namespace
	// (a system role).
	Role Role
	// Anonymous methods need no credentials at all.
	Anonymous bool
	// System methods need Role in every namespace (a system role) whatever the request's
	// namespace: creating or changing a namespace is the cluster's administrator's business.
	System bool
}

// satisfiedBy reports whether held covers the needed role: admin covers everything, writer
// covers reader.
func (a Access) satisfiedBy(held Role) bool {
	switch {
	case a.Role == RoleNone:
		return true
	case held&RoleAdmin != 0:
		return true
	case a.Role == RoleReader:
		return held&(RoleReader|RoleWriter) != 0
	default:
		return held&a.Role != 0
	}
}

// defaultAuthorizer checks a method's Access against the principal's roles.
type defaultAuthorizer struct {
	methods map[string]Access
}

// NewDefaultAuthorizer authorizes by MethodAccess; a method it does not know needs the admin
// role of every namespace (deny by default).
func NewDefaultAuthorizer() Authorizer {
	return &defaultAuthorizer{methods: MethodAccess}
}

func (a *defaultAuthorizer) Authorize(_ context.Context, claims *Claims, target *CallTarget) (Result, error) {
	access, known := a.methods[target.APIName]
	if !known {
		access = Access{Role: RoleAdmin}
	}
	if access.Anonymous {
		return Result{Decision: DecisionAllow}, nil
	}
	if claims == nil {
		return Result{Reason: "no credentials"}, nil
	}
	held := claims.System
	if target.Namespace != "" && !access.System {
		held = claims.RoleIn(target.Namespace)
	}
	if access.Role == RoleNone {
		// Authentication is enough, but a namespace-scoped call still needs some role in it,
		// so a principal of one namespace cannot probe another.
		if target.Namespace == "" || held != RoleNone {
			return Result{Decision: DecisionAllow}, nil
		}
		return Result{Reason: fmt.Sprintf("%s has no role in namespace %q", claims.Subject, target.Namespace)}, nil
	}
	if access.satisfiedBy(held) {
		return Result{Decision: DecisionAllow}, nil
	}
	where := fmt.Sprintf("namespace %q", target.Namespace)
	if target.Namespace == "" || access.System {
		where = "every namespace"
	}
	return Result{Reason: fmt.Sprintf("%s needs role %s in %s (has %s)", claims.Subject, access.Role, where, held)}, nil
}

const (
	workflowService = "/temporal.api.workflowservice.v1.WorkflowService/"
	livenessService = "/vigil.api.liveness.v1.WorkerLivenessService/"
	adminService    = "/vigil.api.admin.v1.AdminService/"
	operatorService = "/temporal.api.operatorservice.v1.OperatorService/"
	healthService   = "/grpc.health.v1.Health/"
)

// MethodAccess is the role each public method needs. A method missing here needs admin.
var MethodAccess = map[string]Access{
	healthService + "Check": {Anonymous: true},
	healthService + "Watch": {Anonymous: true},

	workflowService + "GetSystemInfo":     {},
	workflowService + "DescribeNamespace": {},
	// Lists every namespace's name and description to any authenticated caller, as Temporal does.
	workflowService + "ListNamespaces": {},

	// Workers.
	workflowService + "RecordWorkerHeartbeat":        {Role: RoleWorker},
	workflowService + "ShutdownWorker":               {Role: RoleWorker},
	workflowService + "PollWorkflowTaskQueue":        {Role: RoleWorker},
	workflowService + "PollActivityTaskQueue":        {Role: RoleWorker},
	workflowService + "PollNexusTaskQueue":           {Role: RoleWorker},
	workflowService + "RespondNexusTaskCompleted":    {Role: RoleWorker},
	workflowService + "RespondNexusTaskFailed":       {Role: RoleWorker},
	workflowService + "RespondActivityTaskCompleted": {Role: RoleWorker},
	workflowService + "RespondActivityTaskFailed":    {Role: RoleWorker},
	workflowService + "RespondActivityTaskCanceled":  {Role: RoleWorker},
	workflowService + "RecordActivityTaskHeartbeat":  {Role: RoleWorker},
	livenessService + "RecordHeartbeat":              {Role: RoleWorker},

	// Readers.
	workflowService + "DescribeWorker":            {Role: RoleReader},
	workflowService + "ListWorkers":               {Role: RoleReader},
	workflowService + "CountWorkers":              {Role: RoleReader},
	workflowService + "DescribeActivityExecution": {Role: RoleReader},
	workflowService + "PollActivityExecution":     {Role: RoleReader},
	workflowService + "ListActivityExecutions":    {Role: RoleReader},
	workflowService + "CountActivityExecutions":   {Role: RoleReader},
	livenessService + "DescribeWorkerLiveness":    {Role: RoleReader},
	livenessService + "ListWorkerLiveness":        {Role: RoleReader},
	livenessService + "ListHosts":                 {Role: RoleReader},
	operatorService + "ListSearchAttributes":      {Role: RoleReader},
	workflowService + "DescribeTaskQueue":         {Role: RoleReader},
	workflowService + "ListTaskQueuePartitions":   {Role: RoleReader},

	// Writers. The ById completions are async completion by a client (the SDK's workers never
	// send them): they name any activity of the namespace, so a worker-only principal, bound to
	// the tokens its own workers polled, may not use them.
	workflowService + "StartActivityExecution":         {Role: RoleWriter},
	workflowService + "RequestCancelActivityExecution": {Role: RoleWriter},
	workflowService + "TerminateActivityExecution":     {Role: RoleWriter},
	workflowService + "DeleteActivityExecution":        {Role: RoleWriter},
	workflowService + "PauseActivityExecution":         {Role: RoleWriter},
	workflowService + "UnpauseActivityExecution":       {Role: RoleWriter},
	workflowService + "ResetActivityExecution":         {Role: RoleWriter},
	workflowService + "UpdateActivityExecutionOptions": {Role: RoleWriter},
	// The workflow-activity forms, which `temporal activity pause/...` sends.
	workflowService + "PauseActivity":                    {Role: RoleWriter},
	workflowService + "UnpauseActivity":                  {Role: RoleWriter},
	workflowService + "ResetActivity":                    {Role: RoleWriter},
	workflowService + "UpdateActivityOptions":            {Role: RoleWriter},
	workflowService + "RespondActivityTaskCompletedById": {Role: RoleWriter},
	workflowService + "RespondActivityTaskFailedById":    {Role: RoleWriter},
	workflowService + "RespondActivityTaskCanceledById":  {Role: RoleWriter},
	workflowService + "RecordActivityTaskHeartbeatById":  {Role: RoleWriter},

	// Admins. Creating and changing namespaces needs the cluster's admin role (every namespace).
	workflowService + "RegisterNamespace": {Role: RoleAdmin, System: true},
	workflowService + "UpdateNamespace":   {Role: RoleAdmin, System: true},
	operatorService + "DeleteNamespace":   {Role: RoleAdmin, System: true},
	livenessService + "DrainWorker":       {Role: RoleAdmin},
	// A namespace's search attributes are its admin's, as in Temporal.
	operatorService + "AddSearchAttributes":    {Role: RoleAdmin},
	operatorService + "RemoveSearchAttributes": {Role: RoleAdmin},
	adminService + "CreateAPIKey":              {Role: RoleAdmin},
	adminService + "ListAPIKeys":               {Role: RoleAdmin},
	adminService + "RevokeAPIKey":              {Role: RoleAdmin},
	// No namespace in the request: needs the admin role of every namespace.
	adminService + "RotateTaskTokenKey": {Role: RoleAdmin},
}
