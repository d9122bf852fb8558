// Package metrics declares vigil's metrics once, on top of tally.
//
// Every metric is a package-level definition in defs.go, so a name is spelled in exactly one
// place and its tag keys are listed next to it. Code records through the definition:
//
//	metrics.WorkerHeartbeats.With(scope).Inc(1)
//	metrics.RPCErrors.With(scope, metrics.OperationTag("RecordWorkerHeartbeat"), metrics.CodeTag("Unavailable")).Inc(1)
//	metrics.PersistenceLatency.With(scope, metrics.OperationTag("UpdateExecution")).Record(d)
//
// Tag values must come from small, fixed sets (operation names, states, error codes). Never tag
// with worker IDs, business IDs, task IDs or anything else a user creates.
package metrics

import (
	"strconv"
	"time"

	"github.com/uber-go/tally/v4"
)

// Tag keys. Every tag key used by a definition is one of these.
const (
	// TagNamespace is the namespace name. Namespaces are few and operator-created.
	TagNamespace = "namespace"
	// TagOperation is an RPC or persistence operation name.
	TagOperation = "operation"
	// TagTaskType is a CHASM task type name.
	TagTaskType = "task_type"
	// TagState is a component state, e.g. a worker's ACTIVE/INACTIVE.
	TagState = "state"
	// TagKind is a small error or outcome classification.
	TagKind = "kind"
	// TagShard is a history shard number. Use it only where the number of shards is small
	// (single-digit to low hundreds): each shard multiplies the series of every metric it tags.
	TagShard = "shard"
	// TagCode is a gRPC status code name.
	TagCode = "code"
	// TagQueue names a shard's task queue: timer or outbound.
	TagQueue = "queue"
	// TagReason is a small classification of why something was decided, e.g. why an attempt
	// was picked as an orphan.
	TagReason = "reason"
	// TagOutcome is how something that was started ended, e.g. a worker suspicion raised,
	// cleared or confirmed.
	TagOutcome = "outcome"
)

// NoopScope discards everything recorded on it.
var NoopScope = tally.NoopScope

// Tag is one key/value pair to record a metric with.
type Tag struct {
	Key   string
	Value string
}

// NamespaceTag tags with a namespace name.
func NamespaceTag(name string) Tag { return Tag{Key: TagNamespace, Value: name} }

// OperationTag tags with an operation name.
func OperationTag(op string) Tag { return Tag{Key: TagOperation, Value: op} }

// TaskTypeTag tags with a task type name.
func TaskTypeTag(taskType string) Tag { return Tag{Key: TagTaskType, Value: taskType} }

// StateTag tags with a component state.
func StateTag(state string) Tag { return Tag{Key: TagState, Value: state} }

// KindTag tags with an error or outcome kind.
func KindTag(kind string) Tag { return Tag{Key: TagKind, Value: kind} }

// ShardTag tags with a shard number; see TagShard for when that is acceptable.
func ShardTag(shard int32) Tag { return Tag{Key: TagShard, Value: strconv.FormatInt(int64(shard), 10)} }

// CodeTag tags with a gRPC status code name.
func CodeTag(code string) Tag { return Tag{Key: TagCode, Value: code} }

// ReasonTag returns the reason tag.
func ReasonTag(reason string) Tag { return Tag{Key: TagReason, Value: reason} }

// OutcomeTag returns the outcome tag.
func OutcomeTag(outcome string) Tag { return Tag{Key: TagOutcome, Value: outcome} }

// def is what every definition shares: a name and the tag keys it is recorded with.
type def struct {
	name string
	tags []string
}

// Name returns the metric name (before any scope prefix).
func (d def) Name() string { return d.name }

// Tags returns the tag keys the metric is declared with.
func (d def) Tags() []string { return append([]string(nil), d.tags...) }

// scope returns s tagged with tags. The Prometheus reporter requires every series of one name to
// carry the same label keys, so callers pass every declared tag, every time.
func (d def) scope(s tally.Scope, tags []Tag) tally.Scope {
	if len(tags) == 0 {
		return s
	}
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[t.Key] = t.Value
	}
	return s.Tagged(m)
}

// CounterDef declares a counter.
type CounterDef struct{ def }

// NewCounterDef declares a counter recorded with the given tag keys.
func NewCounterDef(name string, tagKeys ...string) CounterDef {
	return CounterDef{def{name: name, tags: tagKeys}}
}

// With returns the counter on scope, tagged with tags.
func (d CounterDef) With(scope tally.Scope, tags ...Tag) tally.Counter {
	return d.scope(scope, tags).Counter(d.name)
}

// GaugeDef declares a gauge.
type GaugeDef struct{ def }

// NewGaugeDef declares a gauge recorded with the given tag keys.
func NewGaugeDef(name string, tagKeys ...string) GaugeDef {
	return GaugeDef{def{name: name, tags: tagKeys}}
}

// With returns the gauge on scope, tagged with tags.
func (d GaugeDef) With(scope tally.Scope, tags ...Tag) tally.Gauge {
	return d.scope(scope, tags).Gauge(d.name)
}

// TimerDef declares a timer (a latency or lag).
type TimerDef struct{ def }

// NewTimerDef declares a timer recorded with the given tag keys.
func NewTimerDef(name string, tagKeys ...string) TimerDef {
	return TimerDef{def{name: name, tags: tagKeys}}
}

// With returns the timer on scope, tagged with tags.
func (d TimerDef) With(scope tally.Scope, tags ...Tag) tally.Timer {
	return d.scope(scope, tags).Timer(d.name)
}

// HistogramDef declares a histogram with fixed buckets: duration buckets for latencies, value
// buckets for counts such as batch sizes.
type HistogramDef struct {
	def
	buckets tally.Buckets
}

// NewDurationHistogramDef declares a histogram of durations.
func NewDurationHistogramDef(name string, buckets tally.DurationBuckets, tagKeys ...string) HistogramDef {
	return HistogramDef{def: def{name: name, tags: tagKeys}, buckets: buckets}
}

// NewValueHistogramDef declares a histogram of plain values (counts, sizes).
func NewValueHistogramDef(name string, buckets tally.ValueBuckets, tagKeys ...string) HistogramDef {
	return HistogramDef{def: def{name: name, tags: tagKeys}, buckets: buckets}
}

// Buckets returns the histogram's bucket upper bounds.
func (d HistogramDef) Buckets() tally.Buckets { return d.buckets }

// With returns the histogram on scope, tagged with tags. Record durations with RecordDuration
// and values with RecordValue, matching how the definition was declared.
func (d HistogramDef) With(scope tally.Scope, tags ...Tag) tally.Histogram {
	return d.scope(scope, tags).Histogram(d.name, d.buckets)
}

// LatencyBuckets suit request latencies: 1ms to about 33s, doubling.
var LatencyBuckets = tally.MustMakeExponentialDurationBuckets(time.Millisecond, 2, 16)
