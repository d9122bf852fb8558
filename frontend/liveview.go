package frontend

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/frontend/namespace"
)

//go:embed web
var webAssets embed.FS

// sseKeepAlive is how often an idle event stream gets a comment line, so proxies keep it open
// and a dead browser is noticed.
const sseKeepAlive = 15 * time.Second

// WithLiveView serves the live web page on the HTTP server: the page at /, its assets under
// /ui/, and the JSON and Server-Sent Events it reads under /api/ (namespaces, one worker's
// record, the watch stream). Everything is embedded in the binary: no CDN, no build step.
// guard, when set, decides who may read the data under /api/ (with auth on: a cluster admin,
// as for profiles, since the page shows every namespace); nil serves everyone. The page and its
// assets are served to everyone (they hold no data): with auth on, the page asks for an API key
// or token and sends it as "Authorization: Bearer" on every /api/ call.
func WithLiveView(liveness *LivenessHandler, namespaces *namespace.Registry, guard func(*http.Request) (status int, err error)) HTTPOption {
	return func(o *httpOptions) {
		mux := guardedMux{mux: o.mux, guard: guard}
		web, _ := fs.Sub(webAssets, "web")
		o.mux.Handle("GET /ui/", http.StripPrefix("/ui/", http.FileServerFS(web)))
		o.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Cache-Control", "no-cache")
			http.ServeFileFS(w, r, web, "index.html")
		})
		mux.HandleFunc("GET /api/namespaces", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(namespaces.Names())
		})
		mux.HandleFunc("GET /api/worker", func(w http.ResponseWriter, r *http.Request) {
			resp, err := liveness.DescribeWorkerLiveness(r.Context(), &livenesspb.DescribeWorkerLivenessRequest{
				Namespace:              r.URL.Query().Get("namespace"),
				WorkerInstanceKey:      r.URL.Query().Get("key"),
				IncludeBoundActivities: true,
			})
			if err != nil {
				httpError(w, err)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			data, _ := protojson.Marshal(resp)
			_, _ = w.Write(data)
		})
		mux.HandleFunc("GET /api/watch", func(w http.ResponseWriter, r *http.Request) { serveWatch(liveness, w, r) })
	}
}

// serveWatch streams WatchWorkers as Server-Sent Events: each event's id is its cursor, so a
// browser's EventSource resumes by itself after a dropped connection (Last-Event-ID). A watch
// that cannot start sends one "failure" event with the message, then ends.
func serveWatch(liveness *LivenessHandler, w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	q := r.URL.Query()
	req := &livenesspb.WatchWorkersRequest{Namespace: q.Get("namespace"), Query: q.Get("query"), Cursor: q.Get("cursor")}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		req.Cursor = id
	}
	if s := q.Get("heartbeat_every"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			http.Error(w, "heartbeat_every: "+err.Error(), http.StatusBadRequest)
			return
		}
		req.HeartbeatEvery = durationpb.New(d)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()

	var mu sync.Mutex
	write := func(format string, args ...any) error {
		mu.Lock()
		defer mu.Unlock()
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return err
		}
		flusher.Flush()
		return nil
	}
	ctx, cancel := context.WithCancel(r.Context())
	// The keep-alive goroutine must be gone before the handler returns: the server finishes the
	// response after that, and a flush racing with it corrupts the stream.
	var keepAlive sync.WaitGroup
	defer func() {
		cancel()
		keepAlive.Wait()
	}()
	keepAlive.Add(1)
	go func() {
		defer keepAlive.Done()
		t := time.NewTicker(sseKeepAlive)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if write(": keep-alive\n\n") != nil {
					cancel()
					return
				}
			}
		}
	}()
	err := liveness.Watch(ctx, req, func(ev *livenesspb.WorkerEvent) error {
		data, err := protojson.Marshal(ev)
		if err != nil {
			return err
		}
		return write("id: %s\ndata: %s\n\n", ev.GetCursor(), data)
	})
	if err != nil && ctx.Err() == nil {
		st := serviceerror.ToStatus(err)
		data, _ := json.Marshal(map[string]string{"code": st.Code().String(), "message": st.Message()})
		_ = write("event: failure\ndata: %s\n\n", data)
	}
}

// httpError answers a handler error with the HTTP status of its gRPC code.
func httpError(w http.ResponseWriter, err error) {
	st := serviceerror.ToStatus(err)
	code := http.StatusInternalServerError
	switch st.Code() {
	case codes.InvalidArgument:
		code = http.StatusBadRequest
	case codes.NotFound:
		code = http.StatusNotFound
	case codes.Unimplemented:
		code = http.StatusNotImplemented
	case codes.ResourceExhausted:
		code = http.StatusTooManyRequests
	}
	http.Error(w, strconv.Itoa(int(st.Code()))+" "+st.Message(), code)
}

// guardedMux registers handlers behind a guard (none: as they are).
type guardedMux struct {
	mux   *http.ServeMux
	guard func(*http.Request) (int, error)
}

func (g guardedMux) Handle(pattern string, h http.Handler) {
	if g.guard == nil {
		g.mux.Handle(pattern, h)
		return
	}
	g.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code, err := g.guard(r); err != nil {
			http.Error(w, err.Error(), code)
			return
		}
		h.ServeHTTP(w, r)
	}))
}

func (g guardedMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	g.Handle(pattern, http.HandlerFunc(h))
}
