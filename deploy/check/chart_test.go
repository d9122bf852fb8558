package check

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
)

var update = flag.Bool("update", false, "rewrite testdata/*.yaml from the chart")

const chartDir = "../helm/vigil"

// render renders the chart as `helm template vigil deploy/helm/vigil -n vigil -f ci/<mode>-values.yaml`
// does, the files in name order. The generated cluster secret, random at every render, is
// replaced by base64("generated").
func render(t *testing.T, mode string) string {
	t.Helper()
	return renderValues(t, ciValues(t, mode))
}

func ciValues(t *testing.T, mode string) chartutil.Values {
	t.Helper()
	vals, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "ci", mode+"-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

func renderValues(t *testing.T, vals chartutil.Values) string {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := chartutil.ToRenderValues(chrt, vals,
		chartutil.ReleaseOptions{Name: "vigil", Namespace: "vigil", Revision: 1, IsInstall: true},
		chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(chrt, rv)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(files))
	for n, content := range files {
		if strings.HasSuffix(n, ".yaml") && strings.TrimSpace(content) != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		for _, doc := range strings.Split(files[n], "\n---\n") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			b.WriteString("---\n# Source: " + n + "\n" + strings.TrimSpace(doc) + "\n")
		}
	}
	return randomSecret.ReplaceAllString(b.String(), `$1: "Z2VuZXJhdGVk"`)
}

var randomSecret = regexp.MustCompile(`(cluster-secret): "[A-Za-z0-9+/=]+"`)

// TestChartRendersAsCommitted compares the rendered chart with testdata/<mode>.yaml, which
// reviewers read and vigil's own tests load (deploy/deploy_test.go). go test -update rewrites
// them.
func TestChartRendersAsCommitted(t *testing.T) {
	for _, mode := range []string{"single", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			got := render(t, mode)
			path := filepath.Join("testdata", mode+".yaml")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("the chart renders differently from %s: run go test -run TestChartRendersAsCommitted -update in deploy/check and review the diff", path)
			}
		})
	}
}

func TestChartLints(t *testing.T) {
	for _, mode := range []string{"single", "cluster"} {
		vals, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "ci", mode+"-values.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		lint := action.NewLint()
		lint.Strict = true
		lint.Namespace = "vigil"
		res := lint.Run([]string{chartDir}, vals)
		for _, m := range res.Messages {
			if m.Severity >= support.WarningSev { // INFO: the chart has no icon
				t.Errorf("%s: %s", mode, m)
			}
		}
		for _, err := range res.Errors {
			t.Errorf("%s: %v", mode, err)
		}
	}
}

// decode decodes every object of a render strictly into its Kubernetes Go type: a field the
// API does not have, or a value of the wrong type, is an error.
func decode(t *testing.T, manifest string) []runtime.Object {
	t.Helper()
	s := runtime.NewScheme()
	if err := scheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := monitoringv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	ser := json.NewSerializerWithOptions(json.DefaultMetaFactory, s, s, json.SerializerOptions{Yaml: true, Strict: true})
	var out []runtime.Object
	for _, doc := range strings.Split(manifest, "---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		obj, _, err := ser.Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Errorf("%v\n%s", err, doc)
			continue
		}
		out = append(out, obj)
	}
	return out
}

func TestChartObjects(t *testing.T) {
	for _, mode := range []string{"single", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			objs := decode(t, render(t, mode))
			var (
				pod      *corev1.PodSpec
				services = map[string]*corev1.Service{}
				pdb      *policyv1.PodDisruptionBudget
				sm       *monitoringv1.ServiceMonitor
			)
			for _, o := range objs {
				switch o := o.(type) {
				case *appsv1.StatefulSet:
					if mode != "single" {
						t.Errorf("a StatefulSet in %s mode", mode)
					}
					if *o.Spec.Replicas != 1 {
						t.Errorf("SQLite StatefulSet with %d replicas", *o.Spec.Replicas)
					}
					if len(o.Spec.VolumeClaimTemplates) != 1 {
						t.Error("the StatefulSet claims no volume for the database")
					}
					pod = &o.Spec.Template.Spec
				case *appsv1.Deployment:
					if mode != "cluster" {
						t.Errorf("a Deployment in %s mode", mode)
					}
					if *o.Spec.Replicas != 3 {
						t.Errorf("cluster Deployment with %d replicas, want the values' 3", *o.Spec.Replicas)
					}
					pod = &o.Spec.Template.Spec
				case *corev1.Service:
					services[o.Name] = o
				case *policyv1.PodDisruptionBudget:
					pdb = o
				case *monitoringv1.ServiceMonitor:
					sm = o
				}
			}
			if pod == nil {
				t.Fatal("no workload")
			}
			c := pod.Containers[0]
			ports := map[string]int32{}
			for _, p := range c.Ports {
				ports[p.Name] = p.ContainerPort
			}
			// The server's defaults (server.DefaultPort, DefaultHTTPPort; history: the sample).
			if ports["grpc"] != 7233 || ports["http"] != 7243 {
				t.Errorf("container ports %v", ports)
			}
			if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.ReadinessProbe.HTTPGet.Port.StrVal != "http" {
				t.Errorf("readiness probe %+v, want GET /readyz on the http port", c.ReadinessProbe)
			}
			if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.LivenessProbe.HTTPGet.Port.StrVal != "http" {
				t.Errorf("liveness probe %+v, want GET /healthz on the http port", c.LivenessProbe)
			}
			fe := services["vigil-frontend"]
			if fe == nil || fe.Spec.Ports[0].AppProtocol == nil || *fe.Spec.Ports[0].AppProtocol != "grpc" || fe.Spec.Ports[0].Port != 7233 {
				t.Errorf("frontend Service %+v, want port 7233 with appProtocol grpc", fe)
			}
			hl := services["vigil-headless"]
			if hl == nil || hl.Spec.ClusterIP != corev1.ClusterIPNone {
				t.Fatal("no headless Service")
			}
			hasHistory := false
			for _, p := range hl.Spec.Ports {
				hasHistory = hasHistory || (p.Name == "history" && p.Port == 7235)
			}
			if hasHistory != (mode == "cluster") {
				t.Errorf("%s mode: headless Service history port present = %v", mode, hasHistory)
			}
			if pdb == nil {
				t.Error("no PodDisruptionBudget")
			}
			if sm == nil || sm.Spec.Endpoints[0].Port != "http" || sm.Spec.Endpoints[0].Path != "/metrics" {
				t.Errorf("ServiceMonitor %+v, want /metrics on the http port", sm)
			}
			args := strings.Join(c.Args, " ")
			if mode == "cluster" {
				if !strings.Contains(args, "--postgres-dsn=$(VIGIL_POSTGRES_DSN)") || !strings.Contains(args, "--ip=$(POD_IP)") {
					t.Errorf("cluster args %q", args)
				}
				dsnFromSecret := false
				for _, e := range c.Env {
					dsnFromSecret = dsnFromSecret || (e.Name == "VIGIL_POSTGRES_DSN" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil)
				}
				if !dsnFromSecret {
					t.Error("the DSN does not come from a Secret")
				}
			}
		})
	}
}

// podChecksum is the checksum/config annotation of the rendered workload's pod template: a
// change of it restarts every pod.
func podChecksum(t *testing.T, manifest string) string {
	t.Helper()
	for _, o := range decode(t, manifest) {
		switch o := o.(type) {
		case *appsv1.StatefulSet:
			return o.Spec.Template.Annotations["checksum/config"]
		case *appsv1.Deployment:
			return o.Spec.Template.Annotations["checksum/config"]
		}
	}
	t.Fatal("no workload")
	return ""
}

// TestDynamicConfigChangeRestartsNothing: vigil reloads the dynamic configuration in place,
// so a change of it must leave the pod template alone; a change of the static configuration,
// read only at start, must roll the pods.
func TestDynamicConfigChangeRestartsNothing(t *testing.T) {
	for _, mode := range []string{"single", "cluster"} {
		base := podChecksum(t, render(t, mode))
		if base == "" {
			t.Fatalf("%s: the pod template has no checksum/config annotation", mode)
		}
		vals := ciValues(t, mode)
		vals["dynamicConfig"] = map[string]any{"worker.defaultLeaseDuration": []any{map[string]any{"value": "45s"}}}
		if got := podChecksum(t, renderValues(t, vals)); got != base {
			t.Errorf("%s: a dynamic configuration change rolls the pods", mode)
		}
		vals = ciValues(t, mode)
		server, _ := vals["server"].(map[string]any)
		if server == nil {
			server = map[string]any{}
			vals["server"] = server
		}
		server["log"] = map[string]any{"level": "debug"}
		if got := podChecksum(t, renderValues(t, vals)); got == base {
			t.Errorf("%s: a static configuration change does not roll the pods", mode)
		}
	}
}
