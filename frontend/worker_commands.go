package frontend

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	nexuspb "go.temporal.io/api/nexus/v1"
	workerservicepb "go.temporal.io/api/nexusservices/workerservice/v1"
	"go.temporal.io/api/serviceerror"
	workerapipb "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/matching"
)

// Worker commands reach an SDK worker as Nexus tasks on its control queue
// ("temporal-sys/worker-commands/<ns>/<grouping key>"): a StartOperation of the WorkerService
// whose payload is a binary ExecuteCommandsRequest. The SDK reads only
// payload.data; service, operation and encoding are set as Temporal's server sets them.
const (
	// WorkerCommandNexusService is the Nexus service of worker commands.
	WorkerCommandNexusService = "temporal.api.nexusservices.workerservice.v1.WorkerService"
	// WorkerCommandNexusOperation is the Nexus operation of worker commands.
	WorkerCommandNexusOperation = "ExecuteCommands"
	// workerCommandEncoding is the payload's metadata "encoding".
	workerCommandEncoding = "binary/protobuf"
)

// EncodeCancelActivityCommand returns the matching.WorkerCommand payload that makes the worker
// running the attempt with taskToken cancel it: a binary workerservice.v1.ExecuteCommandsRequest
// holding one CancelActivityCommand. PollNexusTaskQueue hands the payload to the worker as is.
func EncodeCancelActivityCommand(taskToken []byte) ([]byte, error) {
	if len(taskToken) == 0 {
		return nil, errors.New("frontend: a CancelActivity command needs the attempt's task token")
	}
	return proto.Marshal(&workerservicepb.ExecuteCommandsRequest{
		Commands: []*workerapipb.WorkerCommand{{
			Type: &workerapipb.WorkerCommand_CancelActivity{
				CancelActivity: &workerapipb.CancelActivityCommand{TaskToken: taskToken},
			},
		}},
	})
}

// CancelActivityCommandID is the command ID of the CancelActivity command of an attempt. It is
// derived from the task token, so a retried send of the same command is deduplicated by
// matching (AddWorkerCommand ignores an ID already queued).
func CancelActivityCommandID(taskToken []byte) string {
	sum := sha256.Sum256(taskToken)
	return "cancel-activity/" + base64.RawURLEncoding.EncodeToString(sum[:18])
}

// NewCancelActivityCommand is the matching.WorkerCommand that cancels the attempt with
// taskToken: ID from CancelActivityCommandID, payload from EncodeCancelActivityCommand.
func NewCancelActivityCommand(taskToken []byte) (matching.WorkerCommand, error) {
	payload, err := EncodeCancelActivityCommand(taskToken)
	if err != nil {
		return matching.WorkerCommand{}, err
	}
	return matching.WorkerCommand{ID: CancelActivityCommandID(taskToken), Payload: payload}, nil
}

// A worker-command task token names the command for AckWorkerCommand: its control queue and
// ID (the namespace comes with RespondNexusTaskCompleted itself). Protobuf wire format by hand,
// fields 1 (version, = 1), 2 (control queue), 3 (command ID).
const (
	commandTokenVersion           = 1
	commandTokenFieldVersion      = protowire.Number(1)
	commandTokenFieldControlQueue = protowire.Number(2)
	commandTokenFieldCommandID    = protowire.Number(3)
)

func encodeCommandToken(controlQueue, commandID string) []byte {
	b := protowire.AppendTag(nil, commandTokenFieldVersion, protowire.VarintType)
	b = protowire.AppendVarint(b, commandTokenVersion)
	b = protowire.AppendTag(b, commandTokenFieldControlQueue, protowire.BytesType)
	b = protowire.AppendString(b, controlQueue)
	b = protowire.AppendTag(b, commandTokenFieldCommandID, protowire.BytesType)
	return protowire.AppendString(b, commandID)
}

func decodeCommandToken(b []byte) (controlQueue, commandID string, err error) {
	var version uint64
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", "", protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == commandTokenFieldVersion && typ == protowire.VarintType:
			version, n = protowire.ConsumeVarint(b)
		case num == commandTokenFieldControlQueue && typ == protowire.BytesType:
			controlQueue, n = protowire.ConsumeString(b)
		case num == commandTokenFieldCommandID && typ == protowire.BytesType:
			commandID, n = protowire.ConsumeString(b)
		default:
			return "", "", fmt.Errorf("unexpected field %d", num)
		}
		if n < 0 {
			return "", "", protowire.ParseError(n)
		}
		b = b[n:]
	}
	if version != commandTokenVersion || controlQueue == "" || commandID == "" {
		return "", "", errors.New("not a worker-command token")
	}
	return controlQueue, commandID, nil
}

// signCommandTokens signs the task tokens of a command's CancelActivity commands, as the
// worker got them with its task: the SDK finds the activity to cancel by comparing token
// bytes. Signing is deterministic, so a redelivered command carries the same bytes; the
// control queue is polled by the same SDK client (so the same principal) as the activity
// queue. A payload that does not decode is left for workerCommandTask to refuse.
func (h *WorkflowHandler) signCommandTokens(cmd matching.WorkerCommand, principal string) matching.WorkerCommand {
	if h.deps.TaskTokens == nil {
		return cmd
	}
	req := &workerservicepb.ExecuteCommandsRequest{}
	if err := proto.Unmarshal(cmd.Payload, req); err != nil {
		return cmd
	}
	for _, c := range req.GetCommands() {
		if cancel := c.GetCancelActivity(); cancel != nil {
			cancel.TaskToken = h.deps.TaskTokens.Sign(cancel.GetTaskToken(), principal)
		}
	}
	payload, err := proto.Marshal(req)
	if err != nil {
		return cmd
	}
	cmd.Payload = payload
	return cmd
}

// workerCommandTask is the PollNexusTaskQueue response that delivers cmd. It fails when the
// payload is not an ExecuteCommandsRequest: the SDK would drop such a task without a reply.
func workerCommandTask(controlQueue string, cmd matching.WorkerCommand) (*workflowservice.PollNexusTaskQueueResponse, error) {
	if err := proto.Unmarshal(cmd.Payload, &workerservicepb.ExecuteCommandsRequest{}); err != nil {
		return nil, fmt.Errorf("payload is not an ExecuteCommandsRequest: %w", err)
	}
	return &workflowservice.PollNexusTaskQueueResponse{
		TaskToken: encodeCommandToken(controlQueue, cmd.ID),
		Request: &nexuspb.Request{
			Variant: &nexuspb.Request_StartOperation{StartOperation: &nexuspb.StartOperationRequest{
				Service:   WorkerCommandNexusService,
				Operation: WorkerCommandNexusOperation,
				RequestId: cmd.ID,
				Payload: &commonpb.Payload{
					Metadata: map[string][]byte{"encoding": []byte(workerCommandEncoding)},
					Data:     cmd.Payload,
				},
			}},
		},
	}, nil
}

// PollNexusTaskQueue serves the SDK's worker-command poll on a worker's control queue: a long
// poll on matching's control queue of that name. The command stays queued until the worker
// acknowledges it (RespondNexusTaskCompleted); matching redelivers it meanwhile. Other Nexus
// task queues are not served (Unimplemented). Like every poll it never answers InvalidArgument
// or NamespaceNotFound, which the SDK treats as fatal for the worker.
func (h *WorkflowHandler) PollNexusTaskQueue(ctx context.Context, req *workflowservice.PollNexusTaskQueueRequest) (*workflowservice.PollNexusTaskQueueResponse, error) {
	if req.GetTaskQueue().GetKind() != enumspb.TASK_QUEUE_KIND_WORKER_COMMANDS {
		return nil, serviceerror.NewUnimplemented("vigil serves Nexus polls only on worker-command queues")
	}
	ns, err := h.pollNamespace(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	controlQueue := req.GetTaskQueue().GetName()
	if controlQueue == "" {
		return nil, errPollFieldMissing("task_queue.name")
	}
	if h.deps.Matching == nil {
		if err := h.longPoll(ctx, ""); err != nil {
			return nil, err
		}
		return &workflowservice.PollNexusTaskQueueResponse{}, nil
	}
	pollCtx, cancel := h.pollContext(ctx)
	defer cancel()
	for {
		cmd, ok, err := h.deps.Matching.PollWorkerCommand(pollCtx, ns.ID, controlQueue)
		if err != nil {
			if err := h.pollFailure(ctx, pollCtx, err); err != nil {
				return nil, err
			}
			return &workflowservice.PollNexusTaskQueueResponse{}, nil
		}
		if !ok {
			return &workflowservice.PollNexusTaskQueueResponse{}, nil
		}
		principal, _ := principalOf(ctx, ns)
		task, err := workerCommandTask(controlQueue, h.signCommandTokens(cmd, principal))
		if err == nil {
			return task, nil
		}
		// Redelivering it would only repeat this: drop it.
		h.deps.Logger.Error("dropping an undeliverable worker command",
			tag.NamespaceID(ns.ID), zap.String("control-queue", controlQueue), zap.String("command-id", cmd.ID), tag.Error(err))
		h.deps.Matching.AckWorkerCommand(ns.ID, controlQueue, cmd.ID)
	}
}

// RespondNexusTaskCompleted acknowledges a worker command: matching stops redelivering it. The
// SDK's per-command results carry nothing vigil acts on. A late or repeated acknowledgement
// is a success.
func (h *WorkflowHandler) RespondNexusTaskCompleted(_ context.Context, req *workflowservice.RespondNexusTaskCompletedRequest) (*workflowservice.RespondNexusTaskCompletedResponse, error) {
	ns, controlQueue, commandID, err := h.commandOfToken(req.GetNamespace(), req.GetTaskToken())
	if err != nil {
		return nil, err
	}
	if !h.deps.Matching.AckWorkerCommand(ns.ID, controlQueue, commandID) {
		h.deps.Logger.Debug("worker command acknowledged after it left its queue",
			tag.NamespaceID(ns.ID), zap.String("control-queue", controlQueue), zap.String("command-id", commandID))
	}
	return &workflowservice.RespondNexusTaskCompletedResponse{}, nil
}

// RespondNexusTaskFailed also acknowledges the command (the SDK never sends it for commands;
// another client might): a command the worker could not execute would fail again, and the
// activity's heartbeat cancel_requested and timeouts remain the fallback. The failure is logged.
func (h *WorkflowHandler) RespondNexusTaskFailed(_ context.Context, req *workflowservice.RespondNexusTaskFailedRequest) (*workflowservice.RespondNexusTaskFailedResponse, error) {
	ns, controlQueue, commandID, err := h.commandOfToken(req.GetNamespace(), req.GetTaskToken())
	if err != nil {
		return nil, err
	}
	failure := req.GetFailure().GetMessage()
	//lint:ignore SA1019 older clients still report handler errors in this field.
	if e := req.GetError(); e != nil && failure == "" {
		failure = e.GetFailure().GetMessage()
	}
	h.deps.Logger.Warn("worker failed a command",
		tag.NamespaceID(ns.ID), zap.String("control-queue", controlQueue), zap.String("command-id", commandID),
		zap.String("identity", req.GetIdentity()), zap.String("failure", failure))
	h.deps.Matching.AckWorkerCommand(ns.ID, controlQueue, commandID)
	return &workflowservice.RespondNexusTaskFailedResponse{}, nil
}

func (h *WorkflowHandler) commandOfToken(namespaceName string, token []byte) (ns *namespace.Namespace, controlQueue, commandID string, err error) {
	ns, err = h.deps.Namespaces.GetByName(namespaceName)
	if err != nil {
		return nil, "", "", err
	}
	controlQueue, commandID, err = decodeCommandToken(token)
	if err != nil {
		return nil, "", "", invalid("task_token is not a worker-command task token: %v", err)
	}
	if h.deps.Matching == nil {
		return nil, "", "", serviceerror.NewUnavailable("worker commands are not served: no matching")
	}
	return ns, controlQueue, commandID, nil
}
