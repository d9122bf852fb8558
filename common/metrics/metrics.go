// Package metrics declares vigil's metrics once, on top of tally.
//
// Every metric is a package-level definition (in defs.go, or a package's metrics.go for the
// metrics only that package records), so a name is spelled in exactly one place, next to its
// help text and its tag keys. Code records through the definition:
//
//	metrics.WorkerHeartbeats.With(scope).Inc(1)
//	metrics.RPCErrors.With(scope, metrics.OperationTag("RecordWorkerHeartbeat"), metrics.CodeTag("Unavailable")).Inc(1)
//	metrics.PersistenceLatency.With(scope, metrics.OperationTag("UpdateExecution")).Record(d)
//
// The exporters (NewScope) apply the naming conventions, so a definition states only what it
// measures:
//
//   - a declared name is its exported name after the "vigil_" prefix, whatever sub-scope it is
//     recorded on (sub-scopes group code, not names: worker_heartbeats is never
//     vigil_worker_worker_heartbeats);
//   - counters end in _total, timers (and duration histograms) in _seconds, recorded in seconds;
//   - the help text is the HELP line;
//   - every declared metric is registered at start, and every series whose labels come from a
//     fixed set (no labels, or values declared with WithValues) is exported at zero before its
//     first event.
//
// Tag values must come from small, fixed sets (operation names, states, error codes). Never tag
// with worker IDs, business IDs, task IDs or anything else a user creates.
package metrics

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
)

// Prefix is the first word of every exported metric name.
const Prefix = "vigil"

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
	// TagVersion, TagCommit, TagBuildDate and TagGoVersion name the running build
	// (BuildInfo only: one series per process).
	TagVersion   = "version"
	TagCommit    = "commit"
	TagBuildDate = "build_date"
	TagGoVersion = "go_version"
)

// KnownTags lists every tag key a definition may use.
var KnownTags = []string{TagNamespace, TagOperation, TagTaskType, TagState, TagKind, TagShard, TagCode, TagQueue, TagReason, TagOutcome,
	TagVersion, TagCommit, TagBuildDate, TagGoVersion}

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

// Type is what kind of instrument a definition declares.
type Type int

// The instrument types.
const (
	TypeCounter Type = iota
	TypeGauge
	TypeTimer
	TypeHistogram
)

func (t Type) String() string {
	switch t {
	case TypeCounter:
		return "counter"
	case TypeGauge:
		return "gauge"
	case TypeTimer:
		return "timer"
	case TypeHistogram:
		return "histogram"
	}
	return "unknown"
}

// Definition is what every declared metric offers the exporters, the generated documentation
// and tests.
type Definition interface {
	// Name is the declared name, without prefix or unit suffix.
	Name() string
	// ExportedName is the Prometheus name: vigil_<name>, then _total for counters and
	// _seconds for durations.
	ExportedName() string
	// Help explains the metric (the HELP line).
	Help() string
	// Tags are the tag keys, in declaration order.
	Tags() []string
	// Values are the declared values of tag key key; nil when the set is open.
	Values(key string) []string
	// Type is the instrument type.
	Type() Type
	// Seconds reports whether the metric is a duration, exported in seconds.
	Seconds() bool
	// Buckets are a timer's or histogram's bucket upper bounds (seconds for durations).
	Buckets() []float64
}

// def is what every definition shares.
type def struct {
	name    string
	help    string
	typ     Type
	tags    []string
	values  map[string][]string
	buckets tally.Buckets
	seconds bool
}

func (d *def) Name() string   { return d.name }
func (d *def) Help() string   { return d.help }
func (d *def) Type() Type     { return d.typ }
func (d *def) Seconds() bool  { return d.seconds }
func (d *def) Tags() []string { return slices.Clone(d.tags) }

func (d *def) Values(key string) []string { return slices.Clone(d.values[key]) }

func (d *def) Buckets() []float64 {
	if d.buckets == nil {
		return nil
	}
	return d.buckets.AsValues()
}

func (d *def) ExportedName() string {
	switch {
	case d.typ == TypeCounter:
		return Prefix + "_" + d.name + "_total"
	case d.seconds:
		return Prefix + "_" + d.name + "_seconds"
	}
	return Prefix + "_" + d.name
}

// setValues declares the fixed set of values of tag key key.
func (d *def) setValues(key string, values []string) {
	if !slices.Contains(d.tags, key) {
		panic(fmt.Sprintf("metrics: %s: WithValues(%q): not one of its tags %v", d.name, key, d.tags))
	}
	if d.values == nil {
		d.values = map[string][]string{}
	}
	d.values[key] = slices.Clone(values)
}

// scope returns s tagged with tags. The Prometheus reporter requires every series of one name to
// carry the same label keys, so callers pass every declared tag, every time.
func (d *def) scope(s tally.Scope, tags []Tag) tally.Scope {
	if len(tags) == 0 {
		return s
	}
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[t.Key] = t.Value
	}
	return s.Tagged(m)
}

var (
	validName = regexp.MustCompile(`^[a-z][a-z0-9_]*[a-z0-9]$`)
	registry  = struct {
		sync.Mutex
		defs map[string]*def
	}{defs: map[string]*def{}}
)

// declare checks a new definition and records it, so that the exporters and the generated
// documentation know every metric. A mistake is a programming error found at start (init).
func declare(d *def) *def {
	switch {
	case !validName.MatchString(d.name):
		panic(fmt.Sprintf("metrics: %q: a name is lower_snake_case", d.name))
	case strings.HasSuffix(d.name, "_total") || strings.HasSuffix(d.name, "_seconds"):
		panic(fmt.Sprintf("metrics: %q: leave the _total/_seconds suffix out; the exporter adds it", d.name))
	case !strings.Contains(strings.TrimSpace(d.help), " ") || !strings.HasSuffix(d.help, "."):
		panic(fmt.Sprintf("metrics: %s(%q, %q, ...): the second argument is the help text, a sentence ending in '.' "+
			"saying what the metric counts or measures; tag keys follow it", d.typ, d.name, d.help))
	}
	for _, k := range d.tags {
		if !slices.Contains(KnownTags, k) {
			panic(fmt.Sprintf("metrics: %s: tag %q is not declared in common/metrics (KnownTags)", d.name, k))
		}
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.defs[d.name]; dup {
		panic(fmt.Sprintf("metrics: %q is declared twice", d.name))
	}
	registry.defs[d.name] = d
	return d
}

// Declared returns every declared metric, sorted by name. Definitions in other packages
// (matching, chasm/activity) are included once their package is linked in.
func Declared() []Definition {
	registry.Lock()
	defer registry.Unlock()
	out := make([]Definition, 0, len(registry.defs))
	for _, d := range registry.defs {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// lookup returns the definition whose exported (prefixed) name, before the unit suffix, is
// name.
func lookup(prefixed string) (*def, bool) {
	name, ok := strings.CutPrefix(prefixed, Prefix+"_")
	if !ok {
		return nil, false
	}
	registry.Lock()
	defer registry.Unlock()
	d, ok := registry.defs[name]
	return d, ok
}

// CounterDef declares a counter.
type CounterDef struct{ *def }

// NewCounterDef declares a counter: its name (exported as vigil_<name>_total), its help text (a
// sentence), and the tag keys it is recorded with.
func NewCounterDef(name, help string, tagKeys ...string) CounterDef {
	return CounterDef{declare(&def{name: name, help: help, typ: TypeCounter, tags: tagKeys})}
}

// WithValues declares the fixed set of values of tag key, so that their series are exported
// at zero from the start. Call it on the declaration only.
func (d CounterDef) WithValues(key string, values ...string) CounterDef {
	d.setValues(key, values)
	return d
}

// With returns the counter on scope, tagged with tags.
func (d CounterDef) With(scope tally.Scope, tags ...Tag) tally.Counter {
	return d.scope(scope, tags).Counter(d.name)
}

// GaugeDef declares a gauge.
type GaugeDef struct{ *def }

// NewGaugeDef declares a gauge: its name, its help text (a sentence), and its tag keys.
func NewGaugeDef(name, help string, tagKeys ...string) GaugeDef {
	return GaugeDef{declare(&def{name: name, help: help, typ: TypeGauge, tags: tagKeys})}
}

// WithValues declares the fixed set of values of tag key (see CounterDef.WithValues).
func (d GaugeDef) WithValues(key string, values ...string) GaugeDef {
	d.setValues(key, values)
	return d
}

// With returns the gauge on scope, tagged with tags.
func (d GaugeDef) With(scope tally.Scope, tags ...Tag) tally.Gauge {
	return d.scope(scope, tags).Gauge(d.name)
}

// TimerDef declares a timer (a latency or lag), exported as a histogram in seconds.
type TimerDef struct{ *def }

// NewTimerDef declares a timer: its name (exported as vigil_<name>_seconds), its help text (a
// sentence), and its tag keys. Its buckets are LatencyBuckets unless WithBuckets says otherwise.
func NewTimerDef(name, help string, tagKeys ...string) TimerDef {
	return TimerDef{declare(&def{name: name, help: help, typ: TypeTimer, tags: tagKeys, buckets: LatencyBuckets, seconds: true})}
}

// WithValues declares the fixed set of values of tag key (see CounterDef.WithValues).
func (d TimerDef) WithValues(key string, values ...string) TimerDef {
	d.setValues(key, values)
	return d
}

// WithBuckets replaces the timer's buckets. Call it on the declaration only.
func (d TimerDef) WithBuckets(b tally.DurationBuckets) TimerDef {
	d.buckets = b
	return d
}

// With returns the timer on scope, tagged with tags.
func (d TimerDef) With(scope tally.Scope, tags ...Tag) tally.Timer {
	return d.scope(scope, tags).Timer(d.name)
}

// HistogramDef declares a histogram with fixed buckets: duration buckets for latencies, value
// buckets for counts such as batch sizes.
type HistogramDef struct{ *def }

// NewDurationHistogramDef declares a histogram of durations (exported in seconds).
func NewDurationHistogramDef(name, help string, buckets tally.DurationBuckets, tagKeys ...string) HistogramDef {
	return HistogramDef{declare(&def{name: name, help: help, typ: TypeHistogram, tags: tagKeys, buckets: buckets, seconds: true})}
}

// NewValueHistogramDef declares a histogram of plain values (counts, sizes).
func NewValueHistogramDef(name, help string, buckets tally.ValueBuckets, tagKeys ...string) HistogramDef {
	return HistogramDef{declare(&def{name: name, help: help, typ: TypeHistogram, tags: tagKeys, buckets: buckets})}
}

// With returns the histogram on scope, tagged with tags. Record durations with RecordDuration
// and values with RecordValue, matching how the definition was declared.
func (d HistogramDef) With(scope tally.Scope, tags ...Tag) tally.Histogram {
	return d.scope(scope, tags).Histogram(d.name, d.buckets)
}

// LatencyBuckets suit request latencies, lags and long polls: 0.5 ms to about 65 s, doubling.
var LatencyBuckets = tally.MustMakeExponentialDurationBuckets(500*time.Microsecond, 2, 18)
