package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	livenesspb "github.com/vigilhq/vigil/api/gen/livenesspb/v1"
	"github.com/vigilhq/vigil/tests/freeport"
)

// Input is the chaos activity's input.
type Input struct {
	ID     string
	Nonce  string
	HoldMs int
}

// Result is what the chaos activity returns: its input's ID and nonce and the worker that ran
// it. A result that names another activity's input is someone else's.
func Result(id, nonce, worker string) string { return id + "/" + nonce + "/" + worker }

// Binaries are the built vigil server and chaos worker.
type Binaries struct {
	Vigil, Worker string
}

// TestHooksTag is the build tag that compiles vigil's test hooks (VIGIL_TEST_HOOKS) in: the
// suite's own build of the binary sets it, a production build never does.
const TestHooksTag = "vigil_testhooks"

// Build compiles vigil (with TestHooksTag) and the chaos worker into dir. It runs `go build` with the module of
// the working directory, so it works from anywhere inside the repository.
func Build(ctx context.Context, dir string) (Binaries, error) {
	b := Binaries{Vigil: filepath.Join(dir, "vigil"), Worker: filepath.Join(dir, "chaos-worker")}
	for _, target := range []struct{ out, pkg string }{
		{b.Vigil, "github.com/vigilhq/vigil/cmd/vigil"},
		{b.Worker, "github.com/vigilhq/vigil/tests/chaos/worker"},
	} {
		cmd := exec.CommandContext(ctx, "go", "build", "-tags", TestHooksTag, "-o", target.out, target.pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			return Binaries{}, fmt.Errorf("go build %s: %v\n%s", target.pkg, err, out)
		}
	}
	return b, nil
}

// serverProc is the vigil server subprocess, restarted on the same database and ports.
type serverProc struct {
	bin, dir       string
	args           []string
	env            []string // added to the suite's environment
	port, httpPort int
	cmd            *exec.Cmd
	exited         chan struct{}
	starts         int
	liveness       livenesspb.WorkerLivenessServiceClient
	conn           *grpc.ClientConn
	logPath        string
}

func newServerProc(bin, dir string, storeArgs []string, dynamicConfig []string) (*serverProc, error) {
	port, err := freeport.Port()
	if err != nil {
		return nil, err
	}
	httpPort, err := freeport.Port()
	if err != nil {
		return nil, err
	}
	args := append([]string{"server", "start", "--port", strconv.Itoa(port), "--http-port", strconv.Itoa(httpPort), "--log-level", "warn"}, storeArgs...)
	for _, v := range dynamicConfig {
		args = append(args, "--dynamic-config-value", v)
	}
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &serverProc{bin: bin, dir: dir, args: args, port: port, httpPort: httpPort,
		liveness: livenesspb.NewWorkerLivenessServiceClient(conn), conn: conn,
		logPath: filepath.Join(dir, "server.log")}, nil
}

func (s *serverProc) address() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// start starts the process; it does not wait until it serves.
func (s *serverProc) start() error {
	log, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	s.starts++
	_, _ = fmt.Fprintf(log, "=== start %d at %s\n", s.starts, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(s.bin, s.args...)
	if len(s.env) > 0 {
		cmd.Env = append(os.Environ(), s.env...)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = dieWithParent()
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return err
	}
	s.cmd = cmd
	exited := make(chan struct{})
	s.exited = exited
	go func() {
		_ = cmd.Wait()
		_ = log.Close()
		close(exited)
	}()
	return nil
}

// waitReady waits until the server answers a liveness call, or fails if it exits.
func (s *serverProc) waitReady(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := s.liveness.ListWorkerLiveness(callCtx, &livenesspb.ListWorkerLivenessRequest{Namespace: "default", PageSize: 1})
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("vigil server exited while starting; log %s:\n%s", s.logPath, tail(s.logPath, 2000))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("vigil server not serving after %v: %v; log %s:\n%s", within, err, s.logPath, tail(s.logPath, 2000))
		}
	}
}

func (s *serverProc) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	s.cmd = nil
}

// stop asks the server to stop (SIGTERM) and waits; it SIGKILLs it after a minute.
func (s *serverProc) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.exited
	}
	s.cmd = nil
}

func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err.Error()
	}
	if st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// workerProc is one chaos worker subprocess.
type workerProc struct {
	name, events string
	cmd          *exec.Cmd
	exited       chan struct{}
}

func startWorker(ctx context.Context, bin, address, queue, name, dir string) (*workerProc, error) {
	w := &workerProc{name: name, events: filepath.Join(dir, "events-"+name)}
	cmd := exec.Command(bin, "-address", address, "-queue", queue, "-name", name, "-events", w.events)
	cmd.SysProcAttr = dieWithParent()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "worker-"+name+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w.cmd = cmd
	started := make(chan struct{})
	go func() {
		scanner := bufio.NewScanner(stdout)
		once := sync.Once{}
		for scanner.Scan() {
			if strings.Contains(scanner.Text(), "worker started") {
				once.Do(func() { close(started) })
			}
		}
	}()
	w.exited = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = log.Close()
		close(w.exited)
	}()
	select {
	case <-started:
		return w, nil
	case <-w.exited:
		return nil, fmt.Errorf("worker %s exited while starting", name)
	case <-ctx.Done():
		w.kill()
		return nil, ctx.Err()
	case <-time.After(2 * time.Minute):
		w.kill()
		return nil, errors.New("worker " + name + " did not start")
	}
}

func (w *workerProc) signal(sig syscall.Signal) { _ = w.cmd.Process.Signal(sig) }

func (w *workerProc) kill() {
	_ = w.cmd.Process.Signal(syscall.SIGCONT)
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	<-w.exited
}
