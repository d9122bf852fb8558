package query

import (
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
)

type columnType int

const (
	stringColumn columnType = iota
	timeColumn
	statusColumn
)

type column struct {
	name  string
	typ   columnType
	str   func(*Worker) string
	time  func(*Worker) time.Time
	alias bool
}

var columns = []column{
	{name: "WorkerInstanceKey", typ: stringColumn, str: func(w *Worker) string { return w.WorkerInstanceKey }},
	{name: "WorkerIdentity", typ: stringColumn, str: func(w *Worker) string { return w.WorkerIdentity }},
	{name: "HostName", typ: stringColumn, str: func(w *Worker) string { return w.HostName }},
	{name: "TaskQueue", typ: stringColumn, str: func(w *Worker) string { return w.TaskQueue }},
	{name: "DeploymentName", typ: stringColumn, str: func(w *Worker) string { return w.DeploymentName }},
	{name: "BuildId", typ: stringColumn, str: func(w *Worker) string { return w.BuildID }},
	{name: "SdkName", typ: stringColumn, str: func(w *Worker) string { return w.SdkName }},
	{name: "SdkVersion", typ: stringColumn, str: func(w *Worker) string { return w.SdkVersion }},
	{name: "Status", typ: statusColumn},
	// Temporal's server accepts both spellings.
	{name: "WorkerStatus", typ: statusColumn, alias: true},
	{name: "StartTime", typ: timeColumn, time: func(w *Worker) time.Time { return w.StartTime }},
	{name: "HeartbeatTime", typ: timeColumn, time: func(w *Worker) time.Time { return w.HeartbeatTime }},
}

var columnsByLowerName = func() map[string]*column {
	m := make(map[string]*column, len(columns))
	for i := range columns {
		m[strings.ToLower(columns[i].name)] = &columns[i]
	}
	return m
}()

// Columns returns the names of the columns a query may use.
func Columns() []string {
	names := make([]string, 0, len(columns))
	for _, c := range columns {
		if !c.alias {
			names = append(names, c.name)
		}
	}
	return names
}

func lookupColumn(name string) (*column, bool) {
	c, ok := columnsByLowerName[strings.ToLower(name)]
	return c, ok
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
