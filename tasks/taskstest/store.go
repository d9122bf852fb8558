// Package taskstest provides an in-memory persistence.TaskStore for tests of the task queues
// and of code that drives them.
package taskstest

import (
	"context"
	"slices"
	"sync"

	"github.com/vigilhq/vigil/persistence"
)

// TaskStore is an in-memory persistence.TaskStore with the contract's ordering: timer tasks by
// (VisibilityTime, TaskID), outbound tasks by TaskID. It is safe for concurrent use. Hooks let a
// test inject failures or observe calls.
type TaskStore struct {
	mu sync.Mutex
	// timers is sorted by key; deleted marks completed entries until the next compaction, so
	// that completing tasks in order does not shift the whole slice each time.
	timers   []*persistence.TimerTask
	deleted  map[timerKey]struct{}
	outbound map[int64]*persistence.OutboundTask

	// BeforeGetTimerTasks, if set, runs at the start of GetTimerTasks; a non-nil error is
	// returned to the caller.
	BeforeGetTimerTasks func(req persistence.GetTimerTasksRequest) error
	// BeforeGetOutboundTasks likewise for GetOutboundTasks.
	BeforeGetOutboundTasks func(afterTaskID int64, pageSize int) error
}

var _ persistence.TaskStore = (*TaskStore)(nil)

type timerKey struct{ unixNano, taskID int64 }

func keyOf(k persistence.TimerTaskKey) timerKey {
	return timerKey{unixNano: k.VisibilityTime.UnixNano(), taskID: k.TaskID}
}

// NewTaskStore returns an empty store.
func NewTaskStore() *TaskStore {
	return &TaskStore{deleted: make(map[timerKey]struct{}), outbound: make(map[int64]*persistence.OutboundTask)}
}

// AddTimerTasks stores timer tasks, as a committed WriteBatch would.
func (s *TaskStore) AddTimerTasks(tasks ...*persistence.TimerTask) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compactLocked(true)
	s.timers = append(s.timers, tasks...)
	slices.SortFunc(s.timers, func(a, b *persistence.TimerTask) int { return a.Key().Compare(b.Key()) })
}

// AddOutboundTasks stores outbound tasks, as a committed WriteBatch would.
func (s *TaskStore) AddOutboundTasks(tasks ...*persistence.OutboundTask) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range tasks {
		s.outbound[t.TaskID] = t
	}
}

func (s *TaskStore) compactLocked(force bool) {
	if len(s.deleted) == 0 || (!force && len(s.deleted) < 1024) {
		return
	}
	s.timers = slices.DeleteFunc(s.timers, func(t *persistence.TimerTask) bool {
		_, gone := s.deleted[keyOf(t.Key())]
		return gone
	})
	clear(s.deleted)
}

// TimerTaskCount returns how many timer tasks are stored.
func (s *TaskStore) TimerTaskCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.timers) - len(s.deleted)
}

// OutboundTaskCount returns how many outbound tasks are stored.
func (s *TaskStore) OutboundTaskCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.outbound)
}

// GetTimerTasks implements persistence.TaskStore.
func (s *TaskStore) GetTimerTasks(ctx context.Context, req persistence.GetTimerTasksRequest) ([]*persistence.TimerTask, error) {
	if s.BeforeGetTimerTasks != nil {
		if err := s.BeforeGetTimerTasks(req); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := slices.BinarySearchFunc(s.timers, req.After, func(t *persistence.TimerTask, k persistence.TimerTaskKey) int {
		if t.Key().Compare(k) <= 0 {
			return -1
		}
		return 1
	})
	var page []*persistence.TimerTask
	for ; i < len(s.timers) && len(page) < req.PageSize; i++ {
		t := s.timers[i]
		if !t.VisibilityTime.Before(req.Before) {
			break
		}
		if _, gone := s.deleted[keyOf(t.Key())]; gone || t.ShardID != req.ShardID {
			continue
		}
		c := *t
		page = append(page, &c)
	}
	return page, nil
}

// CompleteTimerTask implements persistence.TaskStore.
func (s *TaskStore) CompleteTimerTask(ctx context.Context, shardID int32, key persistence.TimerTaskKey) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, found := slices.BinarySearchFunc(s.timers, key, func(t *persistence.TimerTask, k persistence.TimerTaskKey) int {
		return t.Key().Compare(k)
	})
	if found && s.timers[i].ShardID == shardID {
		s.deleted[keyOf(key)] = struct{}{}
		s.compactLocked(false)
	}
	return nil
}

// GetOutboundTasks implements persistence.TaskStore.
func (s *TaskStore) GetOutboundTasks(ctx context.Context, shardID int32, afterTaskID int64, pageSize int) ([]*persistence.OutboundTask, error) {
	if s.BeforeGetOutboundTasks != nil {
		if err := s.BeforeGetOutboundTasks(afterTaskID, pageSize); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []int64
	for id, t := range s.outbound {
		if t.ShardID == shardID && id > afterTaskID {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var page []*persistence.OutboundTask
	for _, id := range ids[:min(len(ids), pageSize)] {
		c := *s.outbound[id]
		page = append(page, &c)
	}
	return page, nil
}

// CompleteOutboundTask implements persistence.TaskStore.
func (s *TaskStore) CompleteOutboundTask(ctx context.Context, shardID int32, taskID int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.outbound[taskID]; ok && t.ShardID == shardID {
		delete(s.outbound, taskID)
	}
	return nil
}
