package chaos

import (
	"os"
	"strings"
	"time"
)

// event is one line a chaos worker recorded: started, finished, cancelled, respond-ok,
// respond-refused or respond-error, for an activity and attempt.
type event struct {
	at       time.Time
	worker   string
	kind     string
	activity string
	attempt  string
	detail   string
}

// readEvents reads a worker's events file. A line cut short by a SIGKILL is skipped.
func readEvents(path, worker string) []event {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []event
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.SplitN(line, " ", 5)
		if len(fields) < 4 {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, fields[0])
		if err != nil {
			continue
		}
		e := event{at: at, worker: worker, kind: fields[1], activity: fields[2], attempt: fields[3]}
		if len(fields) == 5 {
			e.detail = fields[4]
		}
		out = append(out, e)
	}
	return out
}

// inFlight returns the activities a worker started and has not finished or cancelled, each
// with the attempt it holds.
func inFlight(events []event) map[string]string {
	open := map[string]bool{}
	for _, e := range events {
		switch e.kind {
		case "started":
			open[e.activity+" "+e.attempt] = true
		case "finished", "cancelled":
			delete(open, e.activity+" "+e.attempt)
		}
	}
	out := map[string]string{}
	for k := range open {
		id, attempt, _ := strings.Cut(k, " ")
		out[id] = attempt
	}
	return out
}
