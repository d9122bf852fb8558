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
	// completeCalls counts Complete*Tasks calls, so tests can see deletes batched.
	completeCalls int

	// BeforeGetTimerTasks, if set, runs at the start of GetTimerTasks; a non-nil error is
	// returned to the caller.
	BeforeGetTimerTasks func(req persistence.GetTimerTasksRequest) error
	// BeforeComplete, if set, runs at the start of every Complete*Tasks call (outside the
	// store's lock), so a test can hold deletes back.
	BeforeComplete func()
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

// CompleteTimerTasks implements persistence.TaskStore.
func (s *TaskStore) CompleteTimerTasks(ctx context.Context, shardID int32, keys []persistence.TimerTaskKey) error {
	if s.BeforeComplete != nil {
		s.BeforeComplete()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.completeCalls++
	for _, key := range keys {
		i, found := slices.BinarySearchFunc(s.timers, key, func(t *persistence.TimerTask, k persistence.TimerTaskKey) int {
			return t.Key().Compare(k)
		})
		if found && s.timers[i].ShardID == shardID {
			s.deleted[keyOf(key)] = struct{}{}
		}
	}
	s.compactLocked(false)
	return nil
}

// CompleteCalls reports how many Complete*Tasks calls the store received.
func (s *TaskStore) CompleteCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.completeCalls
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

// CompleteOutboundTasks implements persistence.TaskStore.
func (s *TaskStore) CompleteOutboundTasks(ctx context.Context, shardID int32, taskIDs []int64) error {
	if s.BeforeComplete != nil {
		s.BeforeComplete()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.completeCalls++
	for _, taskID := range taskIDs {
		if t, ok := s.outbound[taskID]; ok && t.ShardID == shardID {
			delete(s.outbound, taskID)
		}
	}
	return nil
}
