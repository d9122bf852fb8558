// Command crash-recovery shows what vigil changes when a worker dies mid-activity.
//
// With a vigil server running (make run), it starts two stock Temporal Go SDK workers, A and
// B, as child processes, starts an activity with a 30-minute StartToClose timeout, waits until
// A is running it, SIGKILLs A, and shows B finishing the activity seconds later. With stock
// Temporal the activity would wait out the 30 minutes first. See README.md.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
)

const taskQueue = "crash-recovery"

// quietLogger keeps the SDK's own logs to errors, so the demo's story stays readable.
var quietLogger = sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))

func main() {
	address := flag.String("address", "127.0.0.1:7233", "vigil frontend address")
	flag.Parse()
	if flag.Arg(0) == "worker" {
		runWorker(*address, flag.Arg(1))
		return
	}
	if err := demo(*address); err != nil {
		log.Fatal(err)
	}
}

// ProcessOrder is the activity: ten seconds of work, reported as it goes.
func ProcessOrder(ctx context.Context, order string) (string, error) {
	name := os.Getenv("WORKER_NAME")
	info := activity.GetInfo(ctx)
	fmt.Printf("[worker %s] processing %s (attempt %d)\n", name, order, info.Attempt)
	for step := 1; step <= 10; step++ {
		select {
		case <-time.After(time.Second):
			fmt.Printf("[worker %s] %s: step %d/10\n", name, order, step)
		case <-ctx.Done():
			fmt.Printf("[worker %s] %s: cancelled\n", name, order)
			return "", ctx.Err()
		}
	}
	return fmt.Sprintf("%s processed by worker %s", order, name), nil
}

func runWorker(address, name string) {
	_ = os.Setenv("WORKER_NAME", name)
	c, err := client.Dial(client.Options{
		HostPort:                address,
		Identity:                "worker-" + name,
		WorkerHeartbeatInterval: time.Second, // vigil declares it dead ~3 heartbeats after it stops
		Logger:                  quietLogger,
	})
	if err != nil {
		log.Fatalf("worker %s: %v", name, err)
	}
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterActivity(ProcessOrder)
	fmt.Printf("[worker %s] ready (pid %d)\n", name, os.Getpid())
	if err := w.Run(worker.InterruptCh()); err != nil {
		log.Fatalf("worker %s: %v", name, err)
	}
}

func demo(address string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	a, aOut, err := startWorker(self, address, "A")
	if err != nil {
		return err
	}
	defer a.Process.Kill()

	c, err := client.Dial(client.Options{HostPort: address, Logger: quietLogger})
	if err != nil {
		return fmt.Errorf("dial vigil at %s (is `make run` running?): %w", address, err)
	}
	defer c.Close()
	order := fmt.Sprintf("order-%d", time.Now().Unix())
	handle, err := c.ExecuteActivity(context.Background(), client.StartActivityOptions{
		ID: order, TaskQueue: taskQueue, StartToCloseTimeout: 30 * time.Minute,
	}, ProcessOrder, order)
	if err != nil {
		return err
	}
	fmt.Printf("[demo] started activity %s (StartToClose 30m)\n", order)
	waitFor(aOut, "step 3/10")

	b, bOut, err := startWorker(self, address, "B")
	if err != nil {
		return err
	}
	defer b.Process.Kill()
	waitFor(bOut, "ready")
	time.Sleep(time.Second)

	fmt.Printf("[demo] SIGKILL worker A (pid %d) in the middle of the activity\n", a.Process.Pid)
	_ = a.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	go func() {
		waitFor(bOut, "processing")
		fmt.Printf("[demo] worker B took the activity over %v after the kill\n", time.Since(killed).Round(100*time.Millisecond))
	}()

	var result string
	if err := handle.Get(context.Background(), &result); err != nil {
		return err
	}
	fmt.Printf("[demo] result: %q, %v after the kill (stock Temporal: after the 30m StartToClose)\n",
		result, time.Since(killed).Round(100*time.Millisecond))
	return nil
}

// startWorker runs this program as a worker; its output is echoed and also returned line by line.
func startWorker(self, address, name string) (*exec.Cmd, <-chan string, error) {
	cmd := exec.Command(self, "--address", address, "worker", name)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	lines := make(chan string, 100)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			fmt.Println(scanner.Text())
			select {
			case lines <- scanner.Text():
			default:
			}
		}
	}()
	return cmd, lines, nil
}

func waitFor(lines <-chan string, text string) {
	for line := range lines {
		if strings.Contains(line, text) {
			return
		}
	}
}
