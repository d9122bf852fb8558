package frontend

import (
	"context"

	"github.com/vigilhq/vigil/matching"
)

//go:generate go run go.uber.org/mock/mockgen@v0.6.0 -source=matching.go -destination=matching_mock.go -package=frontend

// Matching is what the frontend needs from the in-memory task queues: activity polls, worker
// command polls, and their completion at shutdown. *matching.Matcher implements it.
type Matching interface {
	// PollActivityTask waits for a task of poll.TaskQueue; ok=false with a nil error when the
	// wait ended without one (shortly before ctx's deadline, CompletePollsOfWorker, or Stop).
	PollActivityTask(ctx context.Context, poll matching.ActivityPoll) (matching.ActivityTaskRef, bool, error)
	// ReturnActivityTask puts back a task that a poll obtained but could not deliver.
	ReturnActivityTask(ref matching.ActivityTaskRef) error
	// CompletePollsOfWorker ends the worker's open activity polls empty and answers its polls
	// empty for a short while after; it returns the number of polls ended.
	CompletePollsOfWorker(namespaceID, workerInstanceKey string) int
	// PollWorkerCommand waits for a command on a worker's control queue, like PollActivityTask.
	// The command stays queued until AckWorkerCommand.
	PollWorkerCommand(ctx context.Context, namespaceID, controlQueue string) (matching.WorkerCommand, bool, error)
	// AckWorkerCommand removes a delivered command; false if it was no longer queued.
	AckWorkerCommand(namespaceID, controlQueue, commandID string) bool
	// DescribeActivityQueue returns an activity task queue's recent pollers and backlog, as the
	// queue's owner knows them.
	DescribeActivityQueue(ctx context.Context, namespaceID, taskQueue string) (matching.QueueDescription, error)
}

var (
	_ Matching = (*matching.Matcher)(nil)
	_ Matching = (*matching.Client)(nil)
)
