// Package tasks runs a shard's durable tasks: the timer queue fires timer tasks at their
// VisibilityTime, the outbound queue delivers side-effect tasks to their destinations. Both are
// type-agnostic: they hand each task to an executor supplied by the history host and only decide
// when, how often and in what order it runs. See README.md.
package tasks

import (
	"context"
	"errors"
	"runtime"
	"sync"
)

// ErrSchedulerStopped is returned by Submit once the scheduler is stopping or has not started.
var ErrSchedulerStopped = errors.New("tasks: scheduler is not running")

const (
	// SchedulerWorkersPerCPUDefault sizes the worker pool: WorkerCount defaults to this many
	// workers per GOMAXPROCS. Executors mostly wait on a durable write or the network, and
	// group commit turns many waiting writers into one fsync: with only a couple of workers per
	// CPU the whole host would make one task's progress per disk sync.
	SchedulerWorkersPerCPUDefault = 32
	// SchedulerQueueSizeDefault is how many submitted jobs may wait for a worker before Submit
	// blocks.
	SchedulerQueueSizeDefault = 1024
)

// SchedulerOptions configures a Scheduler. Zero values take the documented defaults. The pool
// size is fixed for the life of the scheduler.
type SchedulerOptions struct {
	// WorkerCount is the number of jobs run at once. Default SchedulerWorkersPerCPUDefault ×
	// GOMAXPROCS.
	WorkerCount int
	// QueueSize bounds the jobs waiting for a worker. Default SchedulerQueueSizeDefault.
	QueueSize int
}

// Job is one unit of work. ctx is cancelled when the scheduler stops; a job that receives an
// already-cancelled ctx must return without doing its work (it is being drained).
type Job func(ctx context.Context)

// Scheduler is the host-wide bounded worker pool that every shard's queues submit to, so the
// number of tasks executing at once does not grow with the number of shards.
type Scheduler struct {
	workerCount int
	jobs        chan Job

	// mu makes "accepted" and "drained" mutually exclusive: Submit sends while holding the read
	// lock, Stop takes the write lock before draining, so a job accepted by Submit is always seen
	// by either a worker or the drain. Every accepted job therefore runs exactly once, which lets
	// the queues count their jobs with a WaitGroup.
	mu      sync.RWMutex
	started bool
	stopped bool

	ctx       context.Context
	cancel    context.CancelFunc
	stopCh    chan struct{}
	workersWG sync.WaitGroup
	startOnce sync.Once
	stopOnce  sync.Once
}

// NewScheduler returns a scheduler that runs nothing until Start.
func NewScheduler(opts SchedulerOptions) *Scheduler {
	if opts.WorkerCount <= 0 {
		opts.WorkerCount = SchedulerWorkersPerCPUDefault * runtime.GOMAXPROCS(0)
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = SchedulerQueueSizeDefault
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Scheduler{
		workerCount: opts.WorkerCount,
		jobs:        make(chan Job, opts.QueueSize),
		ctx:         ctx,
		cancel:      cancel,
		stopCh:      make(chan struct{}),
	}
}

// Start launches the workers. Start the scheduler before the queues that use it.
func (s *Scheduler) Start() {
	s.startOnce.Do(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.stopped {
			return
		}
		s.started = true
		s.workersWG.Add(s.workerCount)
		for range s.workerCount {
			go s.work()
		}
	})
}

// Stop stops the workers, waits for running jobs to return, then runs every job still queued with
// a cancelled context so that its owner can account for it. Stop the queues first: their Stop
// waits for their jobs, which needs running workers or this drain.
func (s *Scheduler) Stop() {
	s.stopOnce.Do(func() {
		close(s.stopCh)
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
		s.cancel()
		s.workersWG.Wait()
		for {
			select {
			case job := <-s.jobs:
				job(s.ctx)
			default:
				return
			}
		}
	})
}

// Submit queues job, blocking while the queue is full (backpressure on the shard queues). It
// returns ctx.Err() if ctx ends first and ErrSchedulerStopped if the scheduler is not running;
// in both cases job will not run.
func (s *Scheduler) Submit(ctx context.Context, job Job) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.started || s.stopped {
		return ErrSchedulerStopped
	}
	select {
	case s.jobs <- job:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.stopCh:
		return ErrSchedulerStopped
	}
}

func (s *Scheduler) work() {
	defer s.workersWG.Done()
	for {
		// Checked first so that a worker stops taking jobs as soon as Stop begins, even while
		// jobs are queued; the drain runs those with a cancelled context.
		select {
		case <-s.stopCh:
			return
		default:
		}
		select {
		case <-s.stopCh:
			return
		case job := <-s.jobs:
			job(s.ctx)
		}
	}
}
