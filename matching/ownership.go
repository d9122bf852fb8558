package matching

// QueuedCommand is a worker command together with the control queue that held it.
type QueuedCommand struct {
	NamespaceID  string
	ControlQueue string
	Command      WorkerCommand
}

// Released is what ReleaseUnowned took out of the queues this host no longer owns, for the
// caller to hand to their new owners.
type Released struct {
	// Tasks are the queued activity tasks, each queue's in dispatch order.
	Tasks []ActivityTaskRef
	// Commands are the queued worker commands, delivered or not.
	Commands []QueuedCommand
	// Polls is how many waiting polls were answered empty.
	Polls int
}

// SetOwnership makes the matcher serve only the queues for which owns(namespaceID, queue)
// is true: activity task queues by task queue name, control queues by control queue name.
// Calls for another queue return ErrNotOwner (AckWorkerCommand returns false). owns is called
// under the matcher's lock and must be fast and must not call the matcher. When what owns
// answers changes, call ReleaseUnowned. A nil owns (the default) owns every queue.
func (m *Matcher) SetOwnership(owns func(namespaceID, queue string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.owns = owns
}

// Owns reports whether the matcher serves the queue under its current ownership.
func (m *Matcher) Owns(namespaceID, queue string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ownsLocked(namespaceID, queue)
}

func (m *Matcher) ownsLocked(namespaceID, queue string) bool {
	return m.owns == nil || m.owns(namespaceID, queue)
}

// ReleaseUnowned drops every queue the matcher no longer owns: its waiting polls are answered
// empty at once (the SDK polls again and reaches the new owner) and its tasks and commands are
// returned, to be handed over. Because ownership is checked under the same lock, no call can
// add to a released queue afterwards: it gets ErrNotOwner.
func (m *Matcher) ReleaseUnowned() Released {
	var out Released
	now := m.ts.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped || m.owns == nil {
		return out
	}
	for qk, q := range m.activityQueues {
		if m.owns(qk.namespaceID, qk.name) {
			continue
		}
		for w := q.waiters.head; w != nil; w = q.waiters.head {
			q.waiters.remove(w)
			m.unregisterWorkerPoll(w)
			w.ch <- delivery[ActivityTaskRef]{}
			out.Polls++
		}
		for e := q.backlog.pop(); e != nil; e = q.backlog.pop() {
			delete(m.tasks, e.ref.key())
			out.Tasks = append(out.Tasks, e.ref)
		}
		m.dropQueue(q)
		delete(m.activityQueues, qk)
	}
	m.setBacklog(len(m.tasks))
	m.forgetUnownedPollers()
	for qk, q := range m.commandQueues {
		if m.owns(qk.namespaceID, qk.name) {
			continue
		}
		m.expireCommands(q, now)
		out.Polls += q.waiters.len()
		completeAll(&q.waiters)
		for _, e := range q.commands {
			out.Commands = append(out.Commands, QueuedCommand{NamespaceID: qk.namespaceID, ControlQueue: qk.name, Command: e.cmd})
		}
		delete(m.busyCommands, q)
		m.dropQueue(q)
		delete(m.commandQueues, qk)
	}
	return out
}

// dropQueue takes a queue being deleted off the idle list.
func (m *Matcher) dropQueue(q idleTracked) {
	if st := q.idleState(); st.elem != nil {
		m.idle.Remove(st.elem)
		st.elem = nil
	}
}
