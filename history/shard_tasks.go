package history

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/tasks"
)

// shardTimerExecutor and shardOutboundExecutor are the shard seen by its two queues.
type (
	shardTimerExecutor    Shard
	shardOutboundExecutor Shard
)

// ExecuteTimer implements tasks.TimerExecutor.
func (x *shardTimerExecutor) ExecuteTimer(ctx context.Context, pt *persistence.TimerTask) error {
	s := (*Shard)(x)
	return s.executeTask(ctx, pt.Execution, pt.TaskTypeID, pt.Payload, chasm.TaskAttributes{ScheduledTime: pt.VisibilityTime})
}

// ExecuteOutbound implements tasks.OutboundExecutor.
func (x *shardOutboundExecutor) ExecuteOutbound(ctx context.Context, pt *persistence.OutboundTask) error {
	s := (*Shard)(x)
	return s.executeTask(ctx, pt.Execution, pt.TaskTypeID, pt.Payload, chasm.TaskAttributes{Destination: pt.Destination})
}

func (s *Shard) executeTask(
	ctx context.Context, pkey persistence.ExecutionKey, taskTypeID uint32, payload []byte, attrs chasm.TaskAttributes,
) error {
	taskType, rc, task, err := s.decodeTask(pkey, taskTypeID, payload, attrs)
	if err != nil {
		// A task this binary cannot decode will not decode on retry either. Parking it keeps it
		// in the store (a later release may know it) without blocking the queue.
		metrics.TaskErrors.With(s.engine.scope, metrics.TaskTypeTag("unknown")).Inc(1)
		s.logger.Error("unprocessable task parked", executionFields(pkey, tag.Error(err))...)
		return tasks.Park(err)
	}
	key := chasm.ExecutionKey{NamespaceID: pkey.NamespaceID, BusinessID: pkey.BusinessID, RunID: pkey.RunID}
	if until, deferred := taskType.Gate(key, s.engine.timeSource.Now()); deferred {
		// Held back host-wide (the expiry brake): nothing loaded, offered again later.
		return tasks.Defer(until)
	}
	if taskType.IsPure() {
		err = s.executePure(ctx, rc, key, task)
	} else {
		err = s.executeSideEffect(ctx, rc, key, task)
	}
	var dataLoss *serviceerror.DataLoss
	if errors.As(err, &dataLoss) {
		// The execution does not decode (already logged and counted): retrying cannot help.
		return tasks.Park(err)
	}
	return err
}

func (s *Shard) decodeTask(
	pkey persistence.ExecutionKey, taskTypeID uint32, payload []byte, attrs chasm.TaskAttributes,
) (*chasm.RegistrableTask, *chasm.RegistrableComponent, *chasm.Task, error) {
	taskType, ok := s.engine.registry.TaskByID(taskTypeID)
	if !ok {
		return nil, nil, nil, fmt.Errorf("unknown task type %d", taskTypeID)
	}
	rc, ok := s.engine.registry.ComponentByID(pkey.ArchetypeID)
	if !ok {
		return nil, nil, nil, fmt.Errorf("unknown archetype %d", pkey.ArchetypeID)
	}
	msg, err := taskType.UnmarshalPayload(payload)
	if err != nil {
		return nil, nil, nil, err
	}
	return taskType, rc, &chasm.Task{Type: taskType, Attributes: attrs, Payload: msg}, nil
}

func (s *Shard) executePure(ctx context.Context, rc *chasm.RegistrableComponent, key chasm.ExecutionKey, task *chasm.Task) error {
	entry, release, err := s.lockEntry(ctx, rc, key)
	if err != nil {
		return err
	}
	defer release()
	run, err := s.runFor(ctx, entry, rc, key)
	if err != nil {
		return err
	}
	if run == nil {
		s.countPruned(task)
		return nil
	}
	m, err := run.exec.ExecutePureTask(s.engine.timeSource.Now(), task)
	switch {
	case errors.Is(err, chasm.ErrTaskNotValid):
		s.countPruned(task)
		return nil
	case isDeferred(err):
		// Declined for now (the expiry brake): nothing written, offered again later.
		until, _ := chasm.AsDeferred(err)
		return tasks.Defer(until)
	case errors.Is(err, chasm.ErrPureTaskStillValid):
		// Running it again would do the same: report the library bug and drop the task.
		metrics.TaskErrors.With(s.engine.scope, metrics.TaskTypeTag(task.Type.FullName())).Inc(1)
		s.logger.Error("pure task stayed valid after it ran; dropped", tag.TaskType(task.Type.FullName()),
			tag.BusinessID(key.BusinessID), tag.RunID(key.RunID), tag.Error(err))
		return nil
	case err != nil:
		metrics.TaskErrors.With(s.engine.scope, metrics.TaskTypeTag(task.Type.FullName())).Inc(1)
		return err
	}
	current := entry.current == run
	if !current {
		entry = nil // a non-current run is not cached
	}
	return s.write(ctx, entry, run, m, "")
}

func (s *Shard) executeSideEffect(ctx context.Context, rc *chasm.RegistrableComponent, key chasm.ExecutionKey, task *chasm.Task) error {
	valid, err := s.validateTask(ctx, rc, key, task)
	if err != nil {
		return err
	}
	if !valid {
		s.countPruned(task)
		return nil
	}
	// Outside the execution lock: the executor may call other shards, which may call back.
	ref := chasm.ComponentRef{Archetype: rc.FullName(), Key: key}
	if err := task.Type.ExecuteSideEffect(chasm.NewEngineContext(ctx, s.engine), ref, task); err != nil {
		metrics.TaskErrors.With(s.engine.scope, metrics.TaskTypeTag(task.Type.FullName())).Inc(1)
		return err
	}
	return nil
}

func (s *Shard) validateTask(ctx context.Context, rc *chasm.RegistrableComponent, key chasm.ExecutionKey, task *chasm.Task) (bool, error) {
	entry, release, err := s.lockEntry(ctx, rc, key)
	if err != nil {
		return false, err
	}
	defer release()
	run, err := s.runFor(ctx, entry, rc, key)
	if err != nil || run == nil {
		return false, err
	}
	return run.exec.ValidateTask(s.engine.timeSource.Now(), task)
}

func (s *Shard) countPruned(task *chasm.Task) {
	metrics.StaleTasksPruned.With(s.engine.scope, metrics.TaskTypeTag(task.Type.FullName())).Inc(1)
}

func executionFields(k persistence.ExecutionKey, extra ...zap.Field) []zap.Field {
	return append([]zap.Field{
		tag.NamespaceID(k.NamespaceID), zap.Uint32("archetype-id", k.ArchetypeID),
		tag.BusinessID(k.BusinessID), tag.RunID(k.RunID),
	}, extra...)
}

func isDeferred(err error) bool {
	_, ok := chasm.AsDeferred(err)
	return ok
}
