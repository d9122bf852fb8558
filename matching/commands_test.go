package matching

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const testCQ = "temporal-sys/worker-commands/ns-1/grouping-key-1"

type commandResult struct {
	cmd WorkerCommand
	ok  bool
	err error
}

func (e *testEnv) pollCommand(ctx context.Context) <-chan commandResult {
	ch := make(chan commandResult, 1)
	go func() {
		cmd, ok, err := e.m.PollWorkerCommand(ctx, testNS, testCQ)
		ch <- commandResult{cmd, ok, err}
	}()
	return ch
}

// pollCommandNow answers at once: a deliverable command or nothing.
func (e *testEnv) pollCommandNow() (WorkerCommand, bool) {
	e.t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), e.ts.Now().Add(e.m.opts.PollDeadlineMargin/2))
	defer cancel()
	cmd, ok, err := e.m.PollWorkerCommand(ctx, testNS, testCQ)
	require.NoError(e.t, err)
	return cmd, ok
}

func cancelCommand(id string) WorkerCommand {
	return WorkerCommand{ID: id, Payload: []byte("cancel " + id)}
}

func TestWorkerCommands(t *testing.T) {
	t.Parallel()

	t.Run("WorkerCommandDeliveredAndAcked", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		waiting := e.pollCommand(context.Background())
		require.Equal(t, testCQ, receive(t, e.waiting))

		require.NoError(t, e.m.AddWorkerCommand(testNS, testCQ, cancelCommand("c1")))
		got := receive(t, waiting)
		require.NoError(t, got.err)
		require.True(t, got.ok)
		require.Equal(t, cancelCommand("c1"), got.cmd)

		// Queued while nobody polls, delivered to the next poll, in order.
		require.NoError(t, e.m.AddWorkerCommand(testNS, testCQ, cancelCommand("c2")))
		require.NoError(t, e.m.AddWorkerCommand(testNS, testCQ, cancelCommand("c3")))
		require.NoError(t, e.m.AddWorkerCommand(testNS, testCQ, cancelCommand("c2")), "duplicate ID")
		cmd, ok := e.pollCommandNow()
		require.True(t, ok)
		require.Equal(t, "c2", cmd.ID)
		cmd, ok = e.pollCommandNow()
		require.True(t, ok)
		require.Equal(t, "c3", cmd.ID)

		for _, id := range []string{"c1", "c2", "c3"} {
			require.True(t, e.m.AckWorkerCommand(testNS, testCQ, id))
		}
		require.False(t, e.m.AckWorkerCommand(testNS, testCQ, "c1"), "late duplicate ack")

		// Acked commands are never redelivered.
		e.ts.Advance(CommandAckTimeoutDefault)
		e.m.sweep()
		_, ok = e.pollCommandNow()
		require.False(t, ok)
		require.EqualValues(t, 3, e.counter("matching_commands_delivered"))
		require.EqualValues(t, 3, e.counter("matching_commands_acked"))
		require.Zero(t, e.counter("matching_commands_expired"))
	})

	t.Run("UnackedCommandRedeliveredThenExpires", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{CommandAckTimeout: 10 * time.Second, CommandTTL: 30 * time.Second})
		require.NoError(t, e.m.AddWorkerCommand(testNS, testCQ, cancelCommand("c1")))
		_, ok := e.pollCommandNow()
		require.True(t, ok)

		// Not redelivered before the ack timeout.
		e.ts.Advance(10*time.Second - time.Millisecond)
		_, ok = e.pollCommandNow()
		require.False(t, ok)

		// A poll waiting when the ack timeout passes gets it from the sweep.
		waiting := e.pollCommand(context.Background())
		e.awaitWaiting()
		e.ts.Advance(time.Millisecond)
		e.m.sweep()
		got := receive(t, waiting)
		require.True(t, got.ok)
		require.Equal(t, "c1", got.cmd.ID)

		// And again 10 s later, to a poll arriving after the ack timeout.
		e.ts.Advance(10 * time.Second)
		cmd, ok := e.pollCommandNow()
		require.True(t, ok)
		require.Equal(t, "c1", cmd.ID)

		// Dropped at the TTL, counted, whether or not anyone polls.
		e.ts.Advance(10 * time.Second)
		e.m.sweep()
		require.EqualValues(t, 1, e.counter("matching_commands_expired"))
		require.EqualValues(t, 3, e.counter("matching_commands_delivered"))
		_, ok = e.pollCommandNow()
		require.False(t, ok)
		require.False(t, e.m.AckWorkerCommand(testNS, testCQ, "c1"))
	})

	t.Run("CommandOfCancelledPollIsDeliveredAgainAtOnce", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		for i := range 100 {
			ctx, cancel := context.WithCancel(context.Background())
			waiting := e.pollCommand(ctx)
			e.awaitWaiting()
			go cancel()
			cmd := cancelCommand(fmt.Sprintf("c-%d", i))
			require.NoError(t, e.m.AddWorkerCommand(testNS, testCQ, cmd))
			if got := receive(t, waiting); !got.ok {
				require.ErrorIs(t, got.err, context.Canceled)
				again, ok := e.pollCommandNow()
				require.True(t, ok, "iteration %d: command not deliverable", i)
				require.Equal(t, cmd, again)
			}
			require.True(t, e.m.AckWorkerCommand(testNS, testCQ, cmd.ID))
		}
	})

	t.Run("CommandHandedAsPollIsCancelledIsDeliveredAgain", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		waiting := e.pollCommand(ctx)
		e.awaitWaiting()

		// The caller goes away while AddWorkerCommand holds the lock: the poll cannot unlink
		// itself, and is handed the command. (Cancelled after the hand-off instead, the poll
		// could return the command before it saw the cancellation, and the test failed now
		// and then.)
		e.m.mu.Lock()
		cancel()
		q := e.m.commandQueues[queueKey{testNS, testCQ}]
		q.commands = append(q.commands, &commandEntry{cmd: cancelCommand("c1"), expiresAt: e.ts.Now().Add(time.Minute)})
		e.m.busyCommands[q] = struct{}{}
		e.m.dispatchCommands(q, e.ts.Now())
		e.m.mu.Unlock()

		got := receive(t, waiting)
		require.ErrorIs(t, got.err, context.Canceled)
		cmd, ok := e.pollCommandNow()
		require.True(t, ok, "delivered again without waiting for the ack timeout")
		require.Equal(t, "c1", cmd.ID)
		require.EqualValues(t, 1, e.counter("matching_commands_delivered"))
	})

	t.Run("ControlQueuesAreSeparate", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		require.NoError(t, e.m.AddWorkerCommand(testNS, testCQ+"-other", cancelCommand("c1")))
		require.NoError(t, e.m.AddWorkerCommand("ns-2", testCQ, cancelCommand("c2")))
		_, ok := e.pollCommandNow()
		require.False(t, ok)
	})

	t.Run("FullControlQueueRefuses", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{CommandQueueCap: 2})
		require.NoError(t, e.m.AddWorkerCommand(testNS, testCQ, cancelCommand("c1")))
		require.NoError(t, e.m.AddWorkerCommand(testNS, testCQ, cancelCommand("c2")))
		require.ErrorIs(t, e.m.AddWorkerCommand(testNS, testCQ, cancelCommand("c3")), ErrBacklogFull)
		require.EqualValues(t, 1, e.counter("matching_commands_rejected"))
		require.Len(t, e.logs.FilterMessageSnippet("control queue is full").All(), 1)
	})
}
