package frontend

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"
	"google.golang.org/protobuf/encoding/protojson"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/chasm/worker/watch"
)

type sseEvent struct {
	id, event string
	data      *livenesspb.WorkerEvent
	raw       string
}

// readSSE parses Server-Sent Events from r into a channel (comments skipped).
func readSSE(t *testing.T, r io.Reader) <-chan sseEvent {
	out := make(chan sseEvent, 100)
	go func() {
		defer close(out)
		var ev sseEvent
		for s := bufio.NewScanner(r); s.Scan(); {
			line := s.Text()
			switch {
			case line == "":
				if ev.raw != "" {
					if ev.event == "" {
						ev.data = &livenesspb.WorkerEvent{}
						if err := protojson.Unmarshal([]byte(ev.raw), ev.data); err != nil {
							t.Errorf("bad event %q: %v", ev.raw, err)
						}
					}
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.raw = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return out
}

func TestLiveViewServesThePageAndTheStream(t *testing.T) {
	env := newTestEnv(t)
	hub := watch.NewHub(watch.Options{})
	env.deps.Watch = hub
	h := NewLivenessHandler(env.deps)
	env.history.EXPECT().ListWorkers(gomock.Any(), gomock.Any()).Return(&workerpb.ListWorkersResponse{}, nil).AnyTimes()
	mux := http.NewServeMux()
	WithLiveView(h, env.deps.Namespaces, nil)(&httpOptions{mux: mux})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer h.Stop()

	get := func(path string, header ...string) *http.Response {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
		require.NoError(t, err)
		if len(header) == 2 {
			req.Header.Set(header[0], header[1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}

	page := get("/")
	body, _ := io.ReadAll(page.Body)
	require.Equal(t, http.StatusOK, page.StatusCode)
	require.Contains(t, string(body), `<script src="/ui/app.js">`)
	for _, asset := range []string{"/ui/app.js", "/ui/style.css"} {
		require.Equal(t, http.StatusOK, get(asset).StatusCode, asset)
	}
	names, _ := io.ReadAll(get("/api/namespaces").Body)
	require.Contains(t, string(names), testNamespace)

	stream := get("/api/watch?namespace=" + testNamespace)
	require.Equal(t, "text/event-stream", stream.Header.Get("Content-Type"))
	events := readSSE(t, stream.Body)
	end := <-events
	require.Equal(t, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_SNAPSHOT_END, end.data.GetType())
	require.Equal(t, end.data.GetCursor(), end.id, "the SSE id is the cursor")

	hub.Publish(worker.Change{Kind: worker.ChangeRegistered, NamespaceID: env.ns.ID, WorkerInstanceKey: "w-1",
		State: watchedState(workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, "orders")})
	registered := <-events
	require.Equal(t, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_REGISTERED, registered.data.GetType())
	require.Equal(t, "w-1", registered.data.GetWorker().GetWorkerInstanceKey())

	// A browser reconnecting sends Last-Event-ID: it resumes after it, without a snapshot.
	resumed := readSSE(t, get("/api/watch?namespace="+testNamespace, "Last-Event-ID", end.id).Body)
	again := <-resumed
	require.Equal(t, livenesspb.WorkerEventType_WORKER_EVENT_TYPE_REGISTERED, again.data.GetType())
	require.Equal(t, registered.id, again.id)

	// A watch that cannot start says why, once.
	failed := readSSE(t, get("/api/watch?namespace="+testNamespace+"&query=Nope%20%3D%201").Body)
	f := <-failed
	require.Equal(t, "failure", f.event)
	require.Contains(t, f.raw, "unknown column")
	_, open := <-failed
	require.False(t, open)

	require.Equal(t, http.StatusNotFound, get("/api/worker?namespace=nope&key=w-1").StatusCode)
}

func TestLiveViewBehindAGuard(t *testing.T) {
	env := newTestEnv(t)
	env.deps.Watch = watch.NewHub(watch.Options{})
	h := NewLivenessHandler(env.deps)
	defer h.Stop()
	mux := http.NewServeMux()
	refuse := func(*http.Request) (int, error) { return http.StatusForbidden, errors.New("admins only") }
	WithLiveView(h, env.deps.Namespaces, refuse)(&httpOptions{mux: mux})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, path := range []string{"/api/namespaces", "/api/watch?namespace=default", "/api/worker?namespace=default&key=w"} {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusForbidden, resp.StatusCode, path)
	}
	// The page and its assets hold no data: everyone gets them, so the page can ask for a key.
	for _, path := range []string{"/", "/ui/app.js"} {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
}
