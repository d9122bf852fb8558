package matching

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/log/tag"
)

// WorkerCommand is one command for a worker's control queue, e.g. a CancelActivity. Matching
// does not read the payload (the frontend encodes it) and does not copy it: callers must not
// modify it once added.
type WorkerCommand struct {
	// ID identifies the command for AckWorkerCommand; the frontend carries it in the task token.
	ID      string
	Payload []byte
}

type commandEntry struct {
	cmd         WorkerCommand
	expiresAt   time.Time
	delivered   bool
	deliveredAt time.Time
}

// commandQueue is one worker control queue ("temporal-sys/worker-commands/<ns>/<grouping
// key>", as the SDK sent it). It holds few commands, in arrival order.
type commandQueue struct {
	key      queueKey
	commands []*commandEntry
	waiters  waitList[WorkerCommand]
	idle     idleState
}

func (q *commandQueue) idleState() *idleState { return &q.idle }
func (q *commandQueue) isEmpty() bool         { return len(q.commands) == 0 && q.waiters.len() == 0 }

func (q *commandQueue) find(id string) int {
	return slices.IndexFunc(q.commands, func(e *commandEntry) bool { return e.cmd.ID == id })
}

// nextDeliverable returns the oldest command that is not delivered, or whose delivery has gone
// unacknowledged for ackTimeout.
func (q *commandQueue) nextDeliverable(now time.Time, ackTimeout time.Duration) *commandEntry {
	for _, e := range q.commands {
		if !e.delivered || now.Sub(e.deliveredAt) >= ackTimeout {
			return e
		}
	}
	return nil
}

// AddWorkerCommand queues a command for a worker's control queue, or hands it to the queue's
// waiting poll. Delivery is best effort: a command is kept until acknowledged or until
// CommandTTL, redelivered every CommandAckTimeout meanwhile. Adding an ID already queued does
// nothing. It returns ErrBacklogFull at CommandQueueCap and ErrStopped after Stop.
func (m *Matcher) AddWorkerCommand(namespaceID, controlQueue string, cmd WorkerCommand) error {
	if namespaceID == "" || controlQueue == "" || cmd.ID == "" {
		return fmt.Errorf("%w: worker command needs a namespace, control queue and ID", ErrInvalidArgument)
	}
	now := m.ts.Now()
	qk := queueKey{namespaceID, controlQueue}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return ErrStopped
	}
	if !m.ownsLocked(namespaceID, controlQueue) {
		return ErrNotOwner
	}
	q := m.commandQueues[qk]
	if q == nil {
		q = &commandQueue{key: qk}
		m.commandQueues[qk] = q
	} else {
		m.expireCommands(q, now)
		if q.find(cmd.ID) >= 0 {
			return nil
		}
		if len(q.commands) >= m.opts.CommandQueueCap {
			m.metrics.commandsRejected.Inc(1)
			m.logger.Warn("control queue is full: refusing worker command (the heartbeat's cancel_requested still reaches the worker)",
				tag.NamespaceID(namespaceID), controlQueueField(controlQueue), zap.Int("command-queue-cap", m.opts.CommandQueueCap))
			return fmt.Errorf("%w: control queue %q holds %d commands", ErrBacklogFull, controlQueue, len(q.commands))
		}
	}
	q.commands = append(q.commands, &commandEntry{cmd: cmd, expiresAt: now.Add(m.opts.CommandTTL)})
	m.busyCommands[q] = struct{}{}
	m.dispatchCommands(q, now)
	m.updateIdle(q, now)
	return nil
}

// PollWorkerCommand returns the next deliverable command of a control queue, waiting like
// PollActivityTask (same deadline rules; ok=false with a nil error when the wait ends empty).
// The command stays queued until AckWorkerCommand.
func (m *Matcher) PollWorkerCommand(ctx context.Context, namespaceID, controlQueue string) (WorkerCommand, bool, error) {
	if namespaceID == "" || controlQueue == "" {
		return WorkerCommand{}, false, fmt.Errorf("%w: poll needs a namespace and control queue", ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return WorkerCommand{}, false, err
	}
	now := m.ts.Now()
	wait := m.pollWait(ctx, now)
	qk := queueKey{namespaceID, controlQueue}

	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return WorkerCommand{}, false, ErrStopped
	}
	if !m.ownsLocked(namespaceID, controlQueue) {
		m.mu.Unlock()
		return WorkerCommand{}, false, ErrNotOwner
	}
	q := m.commandQueues[qk]
	if q != nil {
		m.expireCommands(q, now)
		if e := q.nextDeliverable(now, m.opts.CommandAckTimeout); e != nil {
			e.delivered, e.deliveredAt = true, now
			m.mu.Unlock()
			m.metrics.commandsDelivered.Inc(1)
			return e.cmd, true, nil
		}
	}
	if wait <= 0 {
		if q != nil {
			m.updateIdle(q, now)
		}
		m.mu.Unlock()
		return WorkerCommand{}, false, nil
	}
	if q == nil {
		q = &commandQueue{key: qk}
		m.commandQueues[qk] = q
	}
	w := newWaiter[WorkerCommand](ctx, qk)
	q.waiters.pushBack(w)
	m.updateIdle(q, now)
	m.mu.Unlock()

	timerC, timer := m.ts.NewTimer(wait)
	defer timer.Stop()
	m.pollWaiting(controlQueue)

	d, outcome := await(m, ctx, w, timerC, func() {
		q.waiters.remove(w)
		m.updateIdle(q, m.ts.Now())
	})
	switch {
	case outcome == outcomeTimedOut:
		return WorkerCommand{}, false, nil
	case outcome == outcomeCancelled:
		return WorkerCommand{}, false, ctx.Err()
	case !d.ok:
		return WorkerCommand{}, false, ctx.Err()
	case ctx.Err() != nil:
		m.undeliver(qk, d.value.ID)
		return WorkerCommand{}, false, ctx.Err()
	}
	m.metrics.commandsDelivered.Inc(1)
	return d.value, true, nil
}

// AckWorkerCommand removes a delivered command (RespondNexusTaskCompleted) and reports whether
// it was still queued. A late or duplicate acknowledgement is harmless.
func (m *Matcher) AckWorkerCommand(namespaceID, controlQueue, commandID string) bool {
	now := m.ts.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.commandQueues[queueKey{namespaceID, controlQueue}]
	if q == nil {
		return false
	}
	i := q.find(commandID)
	if i < 0 {
		return false
	}
	q.commands = slices.Delete(q.commands, i, i+1)
	m.metrics.commandsAcked.Inc(1)
	if len(q.commands) == 0 {
		delete(m.busyCommands, q)
	}
	m.updateIdle(q, now)
	return true
}

// undeliver makes a command handed to a poll that was cancelled at that moment deliverable
// again at once.
func (m *Matcher) undeliver(qk queueKey, id string) {
	now := m.ts.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}
	q := m.commandQueues[qk]
	if q == nil {
		return
	}
	if i := q.find(id); i >= 0 {
		q.commands[i].delivered = false
		m.dispatchCommands(q, now)
	}
}

// dispatchCommands hands deliverable commands to q's waiting polls, one each.
func (m *Matcher) dispatchCommands(q *commandQueue, now time.Time) {
	for q.waiters.len() > 0 {
		e := q.nextDeliverable(now, m.opts.CommandAckTimeout)
		if e == nil {
			return
		}
		w := q.waiters.popLive(nil)
		if w == nil {
			return
		}
		e.delivered, e.deliveredAt = true, now
		w.ch <- delivery[WorkerCommand]{value: e.cmd, ok: true}
	}
}

// expireCommands drops the commands of q older than CommandTTL.
func (m *Matcher) expireCommands(q *commandQueue, now time.Time) {
	n := len(q.commands)
	q.commands = slices.DeleteFunc(q.commands, func(e *commandEntry) bool { return !now.Before(e.expiresAt) })
	if expired := n - len(q.commands); expired > 0 {
		m.metrics.commandsExpired.Inc(int64(expired))
		m.logger.Debug("worker commands expired unacknowledged",
			tag.NamespaceID(q.key.namespaceID), controlQueueField(q.key.name), zap.Int("count", expired))
	}
	if len(q.commands) == 0 {
		delete(m.busyCommands, q)
	}
}
