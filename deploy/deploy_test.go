// Package deploy holds no code: its tests check that the deployment artefacts under deploy/
// agree with the server they deploy. The dashboard's and the alerts' queries name only metrics
// and labels vigil exports, and every static configuration shipped (the image's, the compose
// hosts', the Helm chart's rendered in both modes) loads with the server's own strict loader.
// The artefacts' own tools (Helm, kubeconform, Prometheus's rule parser) check them in the
// deploy/check module.
package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/server" // links every package that declares metrics
)

// exported maps every series name vigil's /metrics can serve to its definition: counters with
// _total, histograms as _bucket, _sum and _count.
func exported() map[string]metrics.Definition {
	out := map[string]metrics.Definition{}
	for _, d := range metrics.Declared() {
		switch d.Type() {
		case metrics.TypeTimer, metrics.TypeHistogram:
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[d.ExportedName()+s] = d
			}
		default:
			out[d.ExportedName()] = d
		}
	}
	return out
}

var (
	metricName = regexp.MustCompile(`\bvigil_[a-zA-Z0-9_]+`)
	matcher    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	selector   = regexp.MustCompile(`\{([^{}]*)\}`)
	grouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
)

// Labels every series has or PromQL adds: the scrape's, and histograms' buckets.
var commonLabels = []string{"job", "instance", "le", "__name__"}

// checkQuery fails when expr names a vigil_ series that is not exported, a label none of its
// series carries, or a value a label with a fixed set of values never takes.
func checkQuery(t *testing.T, where, expr string, series map[string]metrics.Definition) []string {
	t.Helper()
	names := metricName.FindAllString(expr, -1)
	labels := slices.Clone(commonLabels)
	var defs []metrics.Definition
	for _, n := range names {
		d, ok := series[n]
		if !ok {
			t.Errorf("%s: %s is not a metric vigil exports (query %q)", where, n, expr)
			continue
		}
		defs = append(defs, d)
		labels = append(labels, d.Tags()...)
	}
	for _, m := range selector.FindAllStringSubmatch(expr, -1) {
		for _, mm := range matcher.FindAllStringSubmatch(m[1], -1) {
			label, op, value := mm[1], mm[2], mm[3]
			if !slices.Contains(labels, label) {
				t.Errorf("%s: label %q is on none of the query's metrics %v (query %q)", where, label, names, expr)
				continue
			}
			if op != "=" || strings.Contains(value, "$") {
				continue
			}
			for _, d := range defs {
				if vs := d.Values(label); vs != nil && !slices.Contains(vs, value) {
					t.Errorf("%s: %s{%s} takes %v, never %q (query %q)", where, d.ExportedName(), label, vs, value, expr)
				}
			}
		}
	}
	for _, g := range grouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !slices.Contains(labels, l) {
				t.Errorf("%s: grouping by %q, a label none of the query's metrics %v carries (query %q)", where, l, names, expr)
			}
		}
	}
	return names
}

type dashboard struct {
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title   string  `json:"title"`
	Type    string  `json:"type"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func TestDashboardQueriesNameExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("grafana/vigil.json")
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(b, &d))
	series := exported()
	used := map[string]bool{}
	queries := 0
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				queries++
				names := checkQuery(t, "panel "+p.Title, tg.Expr, series)
				if len(names) == 0 && !strings.Contains(tg.Expr, "up{") {
					t.Errorf("panel %q: query %q names no vigil metric", p.Title, tg.Expr)
				}
				for _, n := range names {
					used[n] = true
				}
			}
		}
	}
	walk(d.Panels)
	require.NotZero(t, queries)
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			checkQuery(t, "variable "+v.Name, q["query"].(string), series)
		}
	}
	// What an operator opens the dashboard for.
	for _, want := range []string{
		"vigil_worker_heartbeats_total", "vigil_worker_heartbeat_latency_seconds_bucket",
		"vigil_workers_by_state", "vigil_worker_lease_expiries_total", "vigil_worker_suspicions_total",
		"vigil_activities_rescheduled_total", "vigil_admission_shed_total", "vigil_early_refusals_total",
		"vigil_worker_expiry_brake_engaged", "vigil_shards_owned", "vigil_group_commit_latency_seconds_bucket",
	} {
		require.True(t, used[want], "no panel shows %s", want)
	}
}

func TestAlertQueriesNameExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("prometheus/alerts.yaml")
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(b, &rules))
	series := exported()
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			names := checkQuery(t, "alert "+r.Alert, r.Expr, series)
			if len(names) == 0 && !strings.Contains(r.Expr, "up{") {
				t.Errorf("alert %s: %q names no vigil metric", r.Alert, r.Expr)
			}
		}
	}
	require.NotZero(t, n)
}

// loadConfig loads a static configuration as `vigil server start --config` does.
func loadConfig(t *testing.T, name string, content []byte) server.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server.yaml")
	require.NoError(t, os.WriteFile(path, content, 0o600))
	cfg, err := server.LoadConfig(path)
	require.NoError(t, err, "%s does not load", name)
	return cfg
}

func TestImageConfigLoads(t *testing.T) {
	b, err := os.ReadFile("image/server.yaml")
	require.NoError(t, err)
	cfg := loadConfig(t, "image/server.yaml", b)
	require.Equal(t, "0.0.0.0:7233", cfg.Frontend.Address)
	require.Equal(t, "0.0.0.0:7243", cfg.Frontend.HTTPAddress)
	require.Equal(t, "/var/lib/vigil/vigil.db", cfg.Persistence.SQLite.Path, "the image's VOLUME")
}

func TestComposeConfigsLoad(t *testing.T) {
	paths, err := filepath.Glob("compose/config/vigil-*.yaml")
	require.NoError(t, err)
	require.Len(t, paths, 3, "one configuration per host of the compose cluster")
	ids := map[string]bool{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		cfg := loadConfig(t, p, b)
		require.Equal(t, "postgres", cfg.Persistence.Driver, p)
		require.NotEmpty(t, cfg.Persistence.Postgres.DSN, p)
		require.NotEmpty(t, cfg.Cluster.HistoryAddress, "%s: other hosts must be told where its history port is", p)
		require.NotEmpty(t, cfg.HistoryServer.ClusterSecretFile, p)
		require.False(t, ids[cfg.Cluster.HostID], "%s: host ID %q is taken", p, cfg.Cluster.HostID)
		ids[cfg.Cluster.HostID] = true
	}
}

// TestHelmConfigsLoad loads the server.yaml of the chart's rendered ConfigMap in both modes
// (deploy/check renders them; its TestChartRendersAsCommitted keeps the files current).
func TestHelmConfigsLoad(t *testing.T) {
	for mode, driver := range map[string]string{"single": "sqlite", "cluster": "postgres"} {
		t.Run(mode, func(t *testing.T) {
			b, err := os.ReadFile("check/testdata/" + mode + ".yaml")
			require.NoError(t, err)
			dec := yaml.NewDecoder(strings.NewReader(string(b)))
			found := false
			for {
				var obj struct {
					Kind     string                `yaml:"kind"`
					Metadata struct{ Name string } `yaml:"metadata"`
					Data     map[string]string     `yaml:"data"`
				}
				if err := dec.Decode(&obj); err != nil {
					break
				}
				if obj.Kind != "ConfigMap" || obj.Data["server.yaml"] == "" {
					continue
				}
				found = true
				cfg := loadConfig(t, obj.Metadata.Name, []byte(obj.Data["server.yaml"]))
				require.Equal(t, driver, cfg.Persistence.Driver)
				require.Equal(t, "/etc/vigil/dynamic/dynamicconfig.yaml", cfg.DynamicConfigFile)
			}
			require.True(t, found, "no ConfigMap with a server.yaml in the %s render", mode)
		})
	}
}
