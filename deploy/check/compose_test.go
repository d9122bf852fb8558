package check

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"gopkg.in/yaml.v3"
)

const composeDir = "../compose"

// loadCompose loads compose.yaml as `docker compose config` does: the Compose Specification's
// schema, interpolation, anchors and merges.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	dir, err := filepath.Abs(composeDir)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(dir, "compose.yaml")},
		cli.WithWorkingDirectory(dir), cli.WithName("vigil"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose.yaml does not load: %v", err)
	}
	return p
}

// mounts maps each bind mount's target to its source.
func mounts(t *testing.T, s types.ServiceConfig) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, v := range s.Volumes {
		if v.Type != types.VolumeTypeBind {
			continue
		}
		if _, err := os.Stat(v.Source); err != nil {
			t.Errorf("service %s mounts %s, which does not exist", s.Name, v.Source)
		}
		out[v.Target] = v.Source
	}
	return out
}

func port(t *testing.T, address string) uint32 {
	t.Helper()
	_, p, err := net.SplitHostPort(address)
	if err != nil {
		t.Fatalf("address %q: %v", address, err)
	}
	n, err := strconv.ParseUint(p, 10, 32)
	if err != nil {
		t.Fatalf("address %q: %v", address, err)
	}
	return uint32(n)
}

type vigilConfig struct {
	Frontend struct {
		Address     string `yaml:"address"`
		HTTPAddress string `yaml:"httpAddress"`
	} `yaml:"frontend"`
	HistoryServer struct {
		Address           string `yaml:"address"`
		ClusterSecretFile string `yaml:"clusterSecretFile"`
	} `yaml:"historyServer"`
	Cluster struct {
		HostID         string `yaml:"hostID"`
		HistoryAddress string `yaml:"historyAddress"`
	} `yaml:"cluster"`
	Persistence struct {
		Postgres struct {
			DSN string `yaml:"dsn"`
		} `yaml:"postgres"`
	} `yaml:"persistence"`
	DynamicConfigFile string `yaml:"dynamicConfigFile"`
}

// TestComposeClusterIsConsistent checks what `docker compose up` would get wrong silently: each
// host's configuration is the one mounted where its command reads it, publishes the ports it
// listens on, tells the others a history address they can reach, and finds its secret and
// dynamic configuration; Prometheus scrapes every host and loads the alerts; Grafana gets the
// dashboard.
func TestComposeClusterIsConsistent(t *testing.T) {
	p := loadCompose(t)
	var hosts []string
	httpPorts := map[string]uint32{}
	for _, s := range p.Services {
		if !strings.HasPrefix(s.Name, "vigil-") {
			continue
		}
		hosts = append(hosts, s.Name)
		i := slices.Index(s.Command, "--config")
		if i < 0 || i+1 >= len(s.Command) {
			t.Fatalf("%s: command %v names no --config", s.Name, s.Command)
		}
		m := mounts(t, s)
		src, ok := m[s.Command[i+1]]
		if !ok {
			t.Fatalf("%s: nothing is mounted at %s", s.Name, s.Command[i+1])
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		var cfg vigilConfig
		if err := yaml.Unmarshal(b, &cfg); err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if cfg.Cluster.HostID != s.Name {
			t.Errorf("%s: hostID %q, want the service's name", s.Name, cfg.Cluster.HostID)
		}
		if h, _, _ := net.SplitHostPort(cfg.Cluster.HistoryAddress); h != s.Name {
			t.Errorf("%s: historyAddress %q is not the service's name on the compose network", s.Name, cfg.Cluster.HistoryAddress)
		}
		if port(t, cfg.Cluster.HistoryAddress) != port(t, cfg.HistoryServer.Address) {
			t.Errorf("%s: advertises %s but listens on %s", s.Name, cfg.Cluster.HistoryAddress, cfg.HistoryServer.Address)
		}
		for _, f := range []string{cfg.HistoryServer.ClusterSecretFile, cfg.DynamicConfigFile} {
			if _, ok := m[f]; !ok {
				t.Errorf("%s: its configuration reads %s, which is not mounted", s.Name, f)
			}
		}
		if !strings.Contains(cfg.Persistence.Postgres.DSN, "@postgres:") {
			t.Errorf("%s: DSN %q does not name the postgres service", s.Name, cfg.Persistence.Postgres.DSN)
		}
		published := map[uint32]bool{}
		for _, pc := range s.Ports {
			published[pc.Target] = true
		}
		for _, a := range []string{cfg.Frontend.Address, cfg.Frontend.HTTPAddress} {
			if !published[port(t, a)] {
				t.Errorf("%s: listens on %s, a port it does not publish", s.Name, a)
			}
		}
		httpPorts[s.Name] = port(t, cfg.Frontend.HTTPAddress)
		if _, ok := s.DependsOn["postgres"]; !ok {
			t.Errorf("%s does not wait for postgres", s.Name)
		}
	}
	if len(hosts) != 3 {
		t.Fatalf("hosts %v, want three", hosts)
	}

	prom, err := p.GetService("prometheus")
	if err != nil {
		t.Fatal(err)
	}
	pm := mounts(t, prom)
	var promCfg struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	b, err := os.ReadFile(pm["/etc/prometheus/prometheus.yml"])
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &promCfg); err != nil {
		t.Fatal(err)
	}
	for _, f := range promCfg.RuleFiles {
		if src, ok := pm[f]; !ok || filepath.Base(src) != "alerts.yaml" {
			t.Errorf("prometheus: rule file %s is not deploy/prometheus/alerts.yaml (mounted: %v)", f, pm)
		}
	}
	var targets []string
	for _, sc := range promCfg.ScrapeConfigs {
		if sc.JobName != "vigil" {
			continue // the alerts select job="vigil"
		}
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	for _, h := range hosts {
		want := net.JoinHostPort(h, strconv.Itoa(int(httpPorts[h])))
		if !slices.Contains(targets, want) {
			t.Errorf("prometheus: job vigil does not scrape %s (targets %v)", want, targets)
		}
	}

	grafana, err := p.GetService("grafana")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, src := range mounts(t, grafana) {
		if filepath.Base(src) == "vigil.json" && filepath.Base(filepath.Dir(src)) == "grafana" {
			found = true
		}
	}
	if !found {
		t.Error("grafana: deploy/grafana/vigil.json is not mounted")
	}
}
