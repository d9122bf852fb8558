// Package chasm is vigil's compact component framework, modelled on Temporal's CHASM.
//
// An execution is identified by an ExecutionKey and holds one root Component. A component keeps
// exactly one protobuf state message, plus optional keyed collections that are persisted entry
// by entry, so that a write which does not touch a collection never rewrites it.
//
// Code changes a component only inside a transaction run by an Engine: the engine takes the
// execution's lock, hands the library a MutableContext whose Now is fixed for the transaction,
// and persists the new state together with every task the transaction added (a transactional
// outbox). A transaction that returns an error leaves no trace.
//
// Tasks are data. TaskAttributes decide the queue: a ScheduledTime puts a task on the timer
// queue, a Destination on the outbound queue. Pure tasks run under the execution lock and may
// change state but do no I/O; side-effect tasks run outside the lock, may call other shards,
// and re-enter the engine through a ComponentRef. Every task has a validator, checked before the
// task runs; a pure task must make its own validator false by running.
//
// This package does no I/O. Engines live elsewhere: history (durable) and chasm/chasmtest
// (in memory, for unit tests). Both run transactions through Execution, so library code
// behaves the same under either.
package chasm
