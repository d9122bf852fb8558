package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	workerv1 "go.temporal.io/api/worker/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/vigilhq/vigil/frontend/auth"
	"github.com/vigilhq/vigil/tests/testcluster"
)

// TestLivePageAsksForAKey: with authentication on, the page asks for an API key, says when
// one is refused, and with a cluster admin's key goes live and shows the workers.
func TestLivePageAsksForAKey(t *testing.T) {
	chromium := findChromium()
	if chromium == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed (CI installs it: apt-get install -y chromium)")
		}
		t.Skip("chromium is not installed")
	}
	c := testcluster.New(t, testcluster.Options{Auth: auth.Config{Enabled: true, AdminAPIKey: testAdminKey}})
	b := startBrowser(t, chromium)
	b.call(t, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1440, "height": 860, "deviceScaleFactor": 1, "mobile": false})
	b.call(t, "Page.navigate", map[string]any{"url": "http://" + c.HTTPAddress() + "/"})
	b.waitFor(t, `!document.querySelector("#auth").hidden && document.activeElement?.id === "auth-key"`)
	artifacts := os.Getenv("VIGIL_TEST_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(artifacts, 0o750))

	signIn := func(key string) {
		b.eval(t, fmt.Sprintf(`document.querySelector("#auth-key").value = %q; document.querySelector("#auth-form").requestSubmit()`, key))
	}
	signIn("not-a-key-of-this-server")
	b.waitFor(t, `!document.querySelector("#auth").hidden && document.querySelector("#auth-message").textContent.startsWith("Refused")`)
	b.screenshot(t, filepath.Join(artifacts, "live-page-signin.png"))
	signIn(testAdminKey)
	b.waitFor(t, `document.querySelector("#auth").hidden && document.querySelector("#conn")?.textContent === "live"`)

	conn, err := grpc.NewClient(c.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()), bearer(testAdminKey))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = workflowservice.NewWorkflowServiceClient(conn).RecordWorkerHeartbeat(ctx, &workflowservice.RecordWorkerHeartbeatRequest{Namespace: "default",
		WorkerHeartbeat: []*workerv1.WorkerHeartbeat{{WorkerInstanceKey: "authed-worker", WorkerIdentity: "authed-worker", TaskQueue: "orders",
			HostInfo: &workerv1.WorkerHostInfo{HostName: "vm-1"}}}})
	require.NoError(t, err)
	b.waitFor(t, `[...document.querySelectorAll("#workers tbody tr")].some(tr => tr.querySelector(".ident")?.textContent === "authed-worker" && tr.dataset.state === "ACTIVE")`)
	// The detail panel's record comes from /api/worker, with the key too.
	b.eval(t, `document.querySelector("#workers tbody tr").click()`)
	b.waitFor(t, `document.querySelector("#detail-fields")?.textContent.includes("First heartbeat")`)
	b.eval(t, `document.querySelector("#detail-close").click()`)

	b.screenshot(t, filepath.Join(artifacts, "live-page-auth.png"))

	// Signing out forgets the key and asks again.
	b.eval(t, `document.querySelector("#signout").click()`)
	b.waitFor(t, `!document.querySelector("#auth").hidden && sessionStorage.getItem("vigil.token") === null`)
}
