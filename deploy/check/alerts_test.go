package check

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
)

const alertsFile = "../prometheus/alerts.yaml"

// loadAlerts parses the rules as Prometheus (and promtool check rules) does: unknown fields,
// PromQL that does not parse and templates that do not compile are errors.
func loadAlerts(t *testing.T) map[string]rulefmt.Rule {
	t.Helper()
	groups, errs := rulefmt.ParseFile(alertsFile, false, model.UTF8Validation,
		parser.NewParser(parser.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	rules := map[string]rulefmt.Rule{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			rules[r.Alert] = r
		}
	}
	return rules
}

func TestAlertRulesAreValid(t *testing.T) {
	rules := loadAlerts(t)
	for name, r := range rules {
		if name == "" {
			t.Errorf("a rule without an alert name (record rules belong elsewhere): %s", r.Expr)
			continue
		}
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", name, s)
		}
		for _, a := range []string{"summary", "description"} {
			if r.Annotations[a] == "" {
				t.Errorf("%s: no %s annotation", name, a)
			}
		}
	}
}

// TestAlertsFire evaluates each alert's expression on series a failing cluster exports and on
// those of a healthy one: the pager goes off for the first and stays quiet for the second.
func TestAlertsFire(t *testing.T) {
	rules := loadAlerts(t)
	cases := []struct {
		alert, failing, healthy, want string
	}{
		{
			alert: "VigilExpiryBrakeEngaged",
			failing: `vigil_worker_expiry_brake_engaged{job="vigil",instance="a",kind="server_behind",namespace=""} 0x5 1x20
				vigil_worker_expiry_brake_engaged{job="vigil",instance="b",kind="server_behind",namespace=""} 0x25`,
			healthy: `vigil_worker_expiry_brake_engaged{job="vigil",instance="a",kind="server_behind",namespace=""} 0x25`,
			want:    `{job="vigil",instance="a",kind="server_behind"} 1`,
		},
		{
			alert: "VigilShardsUnowned",
			failing: `vigil_shards_owned{job="vigil",instance="a"} 8x25
				vigil_shards_owned{job="vigil",instance="b"} 8x15 0x10`,
			healthy: `vigil_shards_owned{job="vigil",instance="a"} 8x15 16x10
				vigil_shards_owned{job="vigil",instance="b"} 8x15 0x10`,
			want: `{job="vigil"} 8`,
		},
		{
			// No early refusal was ever counted: the shed calls alone are 10% of the calls.
			alert: "VigilRefusalRateHigh",
			failing: `vigil_rpc_requests_total{job="vigil",instance="a",operation="RecordWorkerHeartbeat"} 0+100x25
				vigil_admission_shed_total{job="vigil",instance="a",kind="heartbeat"} 0+10x25`,
			healthy: `vigil_rpc_requests_total{job="vigil",instance="a",operation="RecordWorkerHeartbeat"} 0+100x25
				vigil_admission_shed_total{job="vigil",instance="a",kind="heartbeat"} 0+1x25
				vigil_early_refusals_total{job="vigil",instance="a"} 0+1x25`,
			want: `{job="vigil"} 0.1`,
		},
		{
			// Every commit takes between 0.5 s and 1 s.
			alert: "VigilStoreCommitSlow",
			failing: `vigil_group_commit_latency_seconds_bucket{job="vigil",instance="a",le="0.1"} 0x25
				vigil_group_commit_latency_seconds_bucket{job="vigil",instance="a",le="0.5"} 0x25
				vigil_group_commit_latency_seconds_bucket{job="vigil",instance="a",le="1"} 0+60x25
				vigil_group_commit_latency_seconds_bucket{job="vigil",instance="a",le="+Inf"} 0+60x25`,
			healthy: `vigil_group_commit_latency_seconds_bucket{job="vigil",instance="a",le="0.1"} 0+60x25
				vigil_group_commit_latency_seconds_bucket{job="vigil",instance="a",le="0.5"} 0+60x25
				vigil_group_commit_latency_seconds_bucket{job="vigil",instance="a",le="1"} 0+60x25
				vigil_group_commit_latency_seconds_bucket{job="vigil",instance="a",le="+Inf"} 0+60x25`,
			want: `{job="vigil",instance="a"} 0.995`,
		},
		{
			alert: "VigilHostDown",
			failing: `up{job="vigil",instance="a"} 1x25
				up{job="vigil",instance="b"} 1x15 0x10`,
			healthy: `up{job="vigil",instance="a"} 1x25`,
			want:    `up{job="vigil",instance="b"} 0`,
		},
		{
			// Host c lost its membership and dropped its shards; a and b took them over.
			alert: "VigilHostNotReady",
			failing: `vigil_shards_owned{job="vigil",instance="a"} 5x15 8x10
				vigil_shards_owned{job="vigil",instance="b"} 5x15 8x10
				vigil_shards_owned{job="vigil",instance="c"} 6x15 0x10`,
			healthy: `vigil_shards_owned{job="vigil",instance="a"} 5x25
				vigil_shards_owned{job="vigil",instance="b"} 5x25
				vigil_shards_owned{job="vigil",instance="c"} 6x25`,
			want: `vigil_shards_owned{job="vigil",instance="c"} 0`,
		},
	}
	tested := map[string]bool{}
	for _, c := range cases {
		tested[c.alert] = true
		t.Run(c.alert, func(t *testing.T) {
			r, ok := rules[c.alert]
			if !ok {
				t.Fatalf("alerts.yaml has no alert %s", c.alert)
			}
			expr := strings.Join(strings.Fields(r.Expr), " ")
			engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
			promqltest.RunTest(t, script(c.failing, expr, c.want), engine)
			promqltest.RunTest(t, script(c.healthy, expr, ""), engine)
		})
	}
	for name := range rules {
		if !tested[name] {
			t.Errorf("alert %s has no case in TestAlertsFire", name)
		}
	}
}

// script is a promqltest script: the series at 1m steps, then the expression evaluated at 24m
// with the result expected (none when want is empty).
func script(series, expr, want string) string {
	var b strings.Builder
	b.WriteString("load 1m\n")
	for _, l := range strings.Split(series, "\n") {
		fmt.Fprintf(&b, "  %s\n", strings.TrimSpace(l))
	}
	fmt.Fprintf(&b, "\neval instant at 24m %s\n", expr)
	if want != "" {
		fmt.Fprintf(&b, "  %s\n", want)
	}
	return b.String()
}
