package tests

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/tests/testcluster"
)

// The live page in a real browser: headless Chromium driven over the DevTools protocol on a
// pipe (--remote-debugging-pipe: JSON messages ending in NUL on fds 3 and 4), so the test needs
// no library and no port. Without Chromium the test skips, except under CI=true, where .ci/run
// installs it.
//
// VIGIL_TEST_ARTIFACTS names a directory for the screenshots (default: the test's temp dir).

func TestLivePageInBrowser(t *testing.T) {
	chromium := findChromium()
	if chromium == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed (CI installs it: apt-get install -y chromium)")
		}
		t.Skip("chromium is not installed")
	}
	c := testcluster.New(t, testcluster.Options{})
	b := startBrowser(t, chromium)
	b.call(t, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1440, "height": 860, "deviceScaleFactor": 1, "mobile": false})
	b.call(t, "Page.navigate", map[string]any{"url": "http://" + c.HTTPAddress() + "/"})
	b.waitFor(t, `document.querySelector("#conn")?.textContent === "live" && document.querySelector("#empty") && !document.querySelector("#empty").hidden`)
	b.eval(t, `window.__notReloaded = true`)

	artifacts := os.Getenv("VIGIL_TEST_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(artifacts, 0o750))

	row := func(identity, state string) string {
		return fmt.Sprintf(`[...document.querySelectorAll("#workers tbody tr")].some(tr => tr.querySelector(".ident")?.textContent === %q && tr.dataset.state === %q)`, identity, state)
	}
	const hostOnline = `document.querySelector(".host")?.dataset.online`

	orders := startWorkerProcess(t, c.Address(), "orders", "orders-worker")
	start := time.Now()
	b.waitFor(t, row("orders-worker", "ACTIVE"))
	t.Logf("orders-worker shown ACTIVE %s after its process started (2-core loaded box)", time.Since(start).Round(time.Millisecond))
	billing := startWorkerProcess(t, c.Address(), "billing", "billing-worker")
	b.waitFor(t, row("billing-worker", "ACTIVE"))
	require.Equal(t, "true", b.eval(t, hostOnline))

	// The first heartbeat gets the default lease (30 s); the following ones 3 × the SDK's
	// interval. Kill it once the page shows the short lease, so the expiry comes soon.
	b.waitFor(t, `[...document.querySelectorAll("#workers tbody tr")].some(tr => tr.querySelector(".ident")?.textContent === "orders-worker" && parseFloat(tr.querySelector(".lease-cell").dataset.duration) < 10)`)

	// SIGKILL one: it goes INACTIVE, its host stays online (the other worker is still ACTIVE).
	require.NoError(t, orders.Process.Kill())
	start = time.Now()
	b.waitFor(t, row("orders-worker", "INACTIVE"))
	t.Logf("orders-worker shown INACTIVE %s after SIGKILL (lease about 3 s)", time.Since(start).Round(time.Millisecond))
	require.Equal(t, "true", b.eval(t, hostOnline))
	require.Equal(t, true, b.eval(t, row("billing-worker", "ACTIVE")))
	b.waitFor(t, `document.querySelector('td.lease-cell[data-active="true"]')?.textContent.endsWith(" s")`)
	b.screenshot(t, filepath.Join(artifacts, "live-page.png"))

	// The worker's detail panel: its record and its transitions.
	b.eval(t, `[...document.querySelectorAll("#workers tbody tr")].find(tr => tr.dataset.state === "INACTIVE").click()`)
	// Killed: its closed connection gives it away before its lease (connection suspicion).
	b.waitFor(t, `document.querySelector("#detail-fields")?.textContent.includes("CONNECTION_LOST")`)
	b.waitFor(t, `document.querySelector("#detail-transitions")?.textContent.includes("INACTIVE")`)
	b.screenshot(t, filepath.Join(artifacts, "live-page-detail.png"))
	b.eval(t, `document.querySelector("#detail-close").click()`)

	// The last one: the host goes offline.
	b.waitFor(t, `[...document.querySelectorAll("#workers tbody tr")].some(tr => tr.querySelector(".ident")?.textContent === "billing-worker" && parseFloat(tr.querySelector(".lease-cell").dataset.duration) < 10)`)
	require.NoError(t, billing.Process.Kill())
	b.waitFor(t, row("billing-worker", "INACTIVE"))
	b.waitFor(t, hostOnline+` === "false"`)
	log := b.eval(t, `document.querySelector("#log").textContent`).(string)
	for _, want := range []string{"REGISTERED", "HOST_ONLINE", "INACTIVE", "HOST_OFFLINE"} {
		require.Contains(t, log, want)
	}
	require.Equal(t, true, b.eval(t, `window.__notReloaded === true`), "the page was updated in place, not reloaded")
	b.screenshot(t, filepath.Join(artifacts, "live-page-offline.png"))

	// The filter box takes the ListWorkers query syntax; a bad query says why.
	filter := func(q string) {
		b.eval(t, fmt.Sprintf(`document.querySelector("#filter").value = %q; document.querySelector("#filter-form").requestSubmit()`, q))
	}
	filter(`TaskQueue = "billing"`)
	b.waitFor(t, `document.querySelectorAll("#workers tbody tr").length === 1 && document.querySelector("#workers tbody tr .ident").textContent === "billing-worker"`)
	require.Contains(t, b.eval(t, `location.search`), "query=")
	filter(`Nope = 1`)
	b.waitFor(t, `!document.querySelector("#error").hidden && document.querySelector("#error").textContent.includes("unknown column")`)
	t.Logf("screenshots in %s", artifacts)
}

func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	return ""
}

// browser is one headless Chromium with one page attached.
type browser struct {
	mu      sync.Mutex
	toPipe  *os.File
	nextID  int
	waiting map[int]chan cdpReply
	session string
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func startBrowser(t *testing.T, path string) *browser {
	t.Helper()
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	cmd := exec.Command(path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--hide-scrollbars", "--remote-debugging-pipe",
		"--user-data-dir="+t.TempDir(), "about:blank")
	cmd.ExtraFiles = []*os.File{inR, outW} // fd 3: commands in, fd 4: replies out
	// Its own process group: chromium's renderer and utility processes outlive a kill of the
	// browser process alone, and keep writing to the profile that t.TempDir then removes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	_ = inR.Close()
	_ = outW.Close()
	b := &browser{toPipe: inW, waiting: make(map[int]chan cdpReply)}
	t.Cleanup(func() {
		_ = inW.Close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	go func() {
		r := bufio.NewReaderSize(outR, 1<<20)
		for {
			msg, err := r.ReadBytes(0)
			if err != nil {
				return
			}
			var m struct {
				ID int `json:"id"`
				cdpReply
			}
			if json.Unmarshal(msg[:len(msg)-1], &m) != nil || m.ID == 0 {
				continue // an event
			}
			b.mu.Lock()
			ch := b.waiting[m.ID]
			delete(b.waiting, m.ID)
			b.mu.Unlock()
			if ch != nil {
				ch <- m.cdpReply
			}
		}
	}()
	var target struct{ TargetID string }
	b.decode(t, b.call(t, "Target.createTarget", map[string]any{"url": "about:blank"}), &target)
	var attached struct{ SessionID string }
	b.decode(t, b.call(t, "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}), &attached)
	b.session = attached.SessionID
	b.call(t, "Page.enable", nil)
	return b
}

func (b *browser) decode(t *testing.T, raw json.RawMessage, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(raw, v))
}

// call sends one command (to the page once attached) and waits for its reply; the bound is a
// failure guard only.
func (b *browser) call(t *testing.T, method string, params map[string]any) json.RawMessage {
	t.Helper()
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan cdpReply, 1)
	b.waiting[id] = ch
	msg := map[string]any{"id": id, "method": method, "params": params}
	if b.session != "" {
		msg["sessionId"] = b.session
	}
	data, err := json.Marshal(msg)
	require.NoError(t, err)
	_, err = b.toPipe.Write(append(data, 0))
	b.mu.Unlock()
	require.NoError(t, err)
	select {
	case reply := <-ch:
		if reply.Error != nil {
			t.Fatalf("%s: %s", method, reply.Error.Message)
		}
		return reply.Result
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s: chromium did not answer", method)
		return nil
	}
}

// eval evaluates a JavaScript expression in the page (awaiting a promise) and returns its value.
func (b *browser) eval(t *testing.T, expr string) any {
	t.Helper()
	var out struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	b.decode(t, b.call(t, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}), &out)
	if out.ExceptionDetails != nil {
		t.Fatalf("evaluate %s: %s %s", expr, out.ExceptionDetails.Text, out.ExceptionDetails.Exception.Description)
	}
	return out.Result.Value
}

// waitFor waits until cond (a JavaScript expression) is truthy in the page: the page itself
// re-checks it whenever the DOM changes.
func (b *browser) waitFor(t *testing.T, cond string) {
	t.Helper()
	b.eval(t, fmt.Sprintf(`new Promise((resolve) => {
		const check = () => { try { if (%s) { obs.disconnect(); resolve(true); return true; } } catch (e) {} return false; };
		const obs = new MutationObserver(check);
		if (!check()) obs.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
	})`, cond))
}

func (b *browser) screenshot(t *testing.T, path string) {
	t.Helper()
	var shot struct{ Data string }
	b.decode(t, b.call(t, "Page.captureScreenshot", map[string]any{"format": "png"}), &shot)
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, png, 0o644))
}
