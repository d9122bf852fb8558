package query

import (
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/vigilhq/vigil/common/visibility"
)

type columnType int

const (
	stringColumn columnType = iota
	timeColumn
	statusColumn
	// The types only custom search attributes have (custom.go).
	intColumn
	doubleColumn
	boolColumn
	keywordListColumn
	textColumn
	// durationColumn is an Int of nanoseconds whose values may be written as durations.
	durationColumn
)

type column struct {
	name  string
	typ   columnType
	str   func(row) string
	time  func(row) time.Time
	alias bool
	// value reads a custom search attribute: nil when the row has none.
	value func(row) any
	// attrType is a custom search attribute's registered type (UNSPECIFIED for a system
	// column).
	attrType enumspb.IndexedValueType
	// sys is the visibility column a system column of activity queries is stored as.
	sys visibility.Column
}

// row is what a query is evaluated against: a *Worker or an *Activity.
type row interface {
	statusValue() int32
}

func (w *Worker) statusValue() int32   { return int32(w.Status) }
func (a *Activity) statusValue() int32 { return int32(a.Status) }

func workerStr(f func(*Worker) string) func(row) string {
	return func(r row) string { return f(r.(*Worker)) }
}

func workerTime(f func(*Worker) time.Time) func(row) time.Time {
	return func(r row) time.Time { return f(r.(*Worker)) }
}

func activityStr(f func(*Activity) string) func(row) string {
	return func(r row) string { return f(r.(*Activity)) }
}

func activityTime(f func(*Activity) time.Time) func(row) time.Time {
	return func(r row) time.Time { return f(r.(*Activity)) }
}

// schema is what one listing can be filtered by: its columns and its status enum.
type schema struct {
	// activities tells an activity schema (ParseActivities, ParseActivitiesWith) from the
	// worker one; only activity queries take ORDER BY and GROUP BY.
	activities  bool
	columns     []column
	byLower     map[string]*column
	parseStatus func(string) (int32, bool)
	statusName  func(int32) string
	statusHint  string
}

func newSchema(columns []column, parse func(string) (int32, bool), name func(int32) string, hint string) *schema {
	s := &schema{columns: columns, byLower: make(map[string]*column, len(columns)), parseStatus: parse, statusName: name, statusHint: hint}
	for i := range columns {
		s.byLower[strings.ToLower(columns[i].name)] = &s.columns[i]
	}
	return s
}

func (s *schema) lookupColumn(name string) (*column, bool) {
	c, ok := s.byLower[strings.ToLower(name)]
	return c, ok
}

func (s *schema) names() []string {
	names := make([]string, 0, len(s.columns))
	for _, c := range s.columns {
		if !c.alias {
			names = append(names, c.name)
		}
	}
	return names
}

func (s *schema) timeColumns() []string {
	var names []string
	for _, c := range s.columns {
		if c.typ == timeColumn && !c.alias {
			names = append(names, c.name)
		}
	}
	return names
}

var workerSchema = newSchema([]column{
	{name: "WorkerInstanceKey", typ: stringColumn, str: workerStr(func(w *Worker) string { return w.WorkerInstanceKey })},
	{name: "WorkerIdentity", typ: stringColumn, str: workerStr(func(w *Worker) string { return w.WorkerIdentity })},
	{name: "HostName", typ: stringColumn, str: workerStr(func(w *Worker) string { return w.HostName })},
	{name: "TaskQueue", typ: stringColumn, str: workerStr(func(w *Worker) string { return w.TaskQueue })},
	{name: "DeploymentName", typ: stringColumn, str: workerStr(func(w *Worker) string { return w.DeploymentName })},
	{name: "BuildId", typ: stringColumn, str: workerStr(func(w *Worker) string { return w.BuildID })},
	{name: "SdkName", typ: stringColumn, str: workerStr(func(w *Worker) string { return w.SdkName })},
	{name: "SdkVersion", typ: stringColumn, str: workerStr(func(w *Worker) string { return w.SdkVersion })},
	{name: "Status", typ: statusColumn},
	// Temporal's server accepts both spellings.
	{name: "WorkerStatus", typ: statusColumn, alias: true},
	{name: "StartTime", typ: timeColumn, time: workerTime(func(w *Worker) time.Time { return w.StartTime })},
	{name: "HeartbeatTime", typ: timeColumn, time: workerTime(func(w *Worker) time.Time { return w.HeartbeatTime })},
}, func(s string) (int32, bool) {
	st, ok := ParseStatus(s)
	return int32(st), ok
}, func(v int32) string { return statusName(enumspb.WorkerStatus(v)) }, "Running, ShuttingDown or Shutdown")

var activitySchema = newActivitySchema(nil)

var activityColumns = []column{
	{name: "ActivityId", sys: visibility.ColumnBusinessID, typ: stringColumn, str: activityStr(func(a *Activity) string { return a.ActivityID })},
	{name: "RunId", sys: visibility.ColumnRunID, typ: stringColumn, str: activityStr(func(a *Activity) string { return a.RunID })},
	{name: "ActivityType", sys: visibility.ColumnTypeName, typ: stringColumn, str: activityStr(func(a *Activity) string { return a.ActivityType })},
	{name: "TaskQueue", sys: visibility.ColumnTaskQueue, typ: stringColumn, str: activityStr(func(a *Activity) string { return a.TaskQueue })},
	// The worker running the current attempt (empty while none does).
	{name: "WorkerInstanceKey", sys: visibility.ColumnWorkerInstanceKey, typ: stringColumn, str: activityStr(func(a *Activity) string { return a.WorkerInstanceKey })},
	{name: "ExecutionStatus", sys: visibility.ColumnStatus, typ: statusColumn},
	{name: "Status", sys: visibility.ColumnStatus, typ: statusColumn, alias: true},
	{name: "StartTime", sys: visibility.ColumnStartTime, typ: timeColumn, time: activityTime(func(a *Activity) time.Time { return a.StartTime })},
	{name: "CloseTime", sys: visibility.ColumnCloseTime, typ: timeColumn, time: activityTime(func(a *Activity) time.Time { return a.CloseTime })},
	// When the activity may first run: its schedule time plus its start delay.
	{name: "ExecutionTime", sys: visibility.ColumnExecutionTime, typ: timeColumn, time: activityTime(func(a *Activity) time.Time { return a.ExecutionTime })},
	// CloseTime - StartTime, NULL while running; values are durations ("90s", "1h30m") or
	// nanoseconds.
	{name: "ExecutionDuration", sys: visibility.ColumnDuration, typ: durationColumn, value: func(r row) any {
		a, ok := r.(*Activity)
		if !ok || a.CloseTime.IsZero() || a.StartTime.IsZero() {
			return nil
		}
		return int64(a.CloseTime.Sub(a.StartTime))
	}},
}

// newActivitySchema is the activity columns followed by custom ones.
func newActivitySchema(custom []column) *schema {
	s := newSchema(append(slices.Clone(activityColumns), custom...), func(s string) (int32, bool) {
		st, ok := ParseActivityStatus(s)
		return int32(st), ok
	}, func(v int32) string { return activityStatusName(enumspb.ActivityExecutionStatus(v)) },
		"Running, Completed, Failed, Canceled, Terminated or TimedOut")
	s.activities = true
	return s
}

// Columns returns the names of the columns a worker query may use.
func Columns() []string { return workerSchema.names() }

// ActivityColumns returns the names of the columns an activity query may use.
func ActivityColumns() []string { return activitySchema.names() }

// ParseActivityStatus reads an activity execution status as users write it: "Running",
// "RUNNING", "TimedOut", "TIMED_OUT" or "ACTIVITY_EXECUTION_STATUS_TIMED_OUT", in any case.
func ParseActivityStatus(s string) (enumspb.ActivityExecutionStatus, bool) {
	norm := strings.ToUpper(strings.TrimSpace(s))
	norm = strings.TrimPrefix(norm, "ACTIVITY_EXECUTION_STATUS_")
	norm = strings.ReplaceAll(norm, "_", "")
	for _, st := range []enumspb.ActivityExecutionStatus{
		enumspb.ACTIVITY_EXECUTION_STATUS_RUNNING, enumspb.ACTIVITY_EXECUTION_STATUS_COMPLETED,
		enumspb.ACTIVITY_EXECUTION_STATUS_FAILED, enumspb.ACTIVITY_EXECUTION_STATUS_CANCELED,
		enumspb.ACTIVITY_EXECUTION_STATUS_TERMINATED, enumspb.ACTIVITY_EXECUTION_STATUS_TIMED_OUT,
	} {
		if strings.ToUpper(activityStatusName(st)) == norm {
			return st, true
		}
	}
	return enumspb.ACTIVITY_EXECUTION_STATUS_UNSPECIFIED, false
}

// ActivityStatusName is the spelling of an activity execution status in queries and listings
// ("Running", "TimedOut").
func ActivityStatusName(s enumspb.ActivityExecutionStatus) string { return activityStatusName(s) }

func activityStatusName(s enumspb.ActivityExecutionStatus) string {
	switch s {
	case enumspb.ACTIVITY_EXECUTION_STATUS_RUNNING:
		return "Running"
	case enumspb.ACTIVITY_EXECUTION_STATUS_COMPLETED:
		return "Completed"
	case enumspb.ACTIVITY_EXECUTION_STATUS_FAILED:
		return "Failed"
	case enumspb.ACTIVITY_EXECUTION_STATUS_CANCELED:
		return "Canceled"
	case enumspb.ACTIVITY_EXECUTION_STATUS_TERMINATED:
		return "Terminated"
	case enumspb.ACTIVITY_EXECUTION_STATUS_TIMED_OUT:
		return "TimedOut"
	}
	return s.String()
}

// ParseStatus reads a worker status the way users write it: "Running", "RUNNING" or
// "WORKER_STATUS_RUNNING", in any case ("ShuttingDown" and "SHUTTING_DOWN" alike).
func ParseStatus(s string) (enumspb.WorkerStatus, bool) {
	norm := strings.ToUpper(strings.TrimSpace(s))
	norm = strings.TrimPrefix(norm, "WORKER_STATUS_")
	norm = strings.ReplaceAll(norm, "_", "")
	switch norm {
	case "RUNNING":
		return enumspb.WORKER_STATUS_RUNNING, true
	case "SHUTTINGDOWN":
		return enumspb.WORKER_STATUS_SHUTTING_DOWN, true
	case "SHUTDOWN":
		return enumspb.WORKER_STATUS_SHUTDOWN, true
	}
	return enumspb.WORKER_STATUS_UNSPECIFIED, false
}

// statusName is the spelling Temporal's CLI prints.
func statusName(s enumspb.WorkerStatus) string {
	switch s {
	case enumspb.WORKER_STATUS_RUNNING:
		return "Running"
	case enumspb.WORKER_STATUS_SHUTTING_DOWN:
		return "ShuttingDown"
	case enumspb.WORKER_STATUS_SHUTDOWN:
		return "Shutdown"
	}
	return s.String()
}
