package history_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/vigilhq/vigil/chasm"
	testpb "github.com/vigilhq/vigil/chasm/chasmtest/gen/testpb/v1"
	"github.com/vigilhq/vigil/chasm/chasmtest/reminder"
	"github.com/vigilhq/vigil/history"
	"github.com/vigilhq/vigil/history/historytest"
)

const (
	crashHelperEnv = "VIGIL_CRASH_HELPER_DIR"
	crashDBFile    = "vigil.db"
	crashAddrFile  = "address"
	crashSinkFile  = "deliveries"
)

// TestCrashHelperProcess is not a test: it is the history host that TestSurvivesSIGKILL runs in
// a subprocess and kills.
func TestCrashHelperProcess(t *testing.T) {
	dir := os.Getenv(crashHelperEnv)
	if dir == "" {
		t.Skip("runs only as the subprocess of TestSurvivesSIGKILL")
	}
	sink, err := newFileSink(filepath.Join(dir, crashSinkFile))
	require.NoError(t, err)
	h, err := historytest.StartE(t, historytest.Options{
		Path:      filepath.Join(dir, crashDBFile),
		NumShards: 4,
		Libraries: []chasm.Library{reminder.NewLibrary(sink)},
		Services: func(engine *history.Engine) []history.ServiceRegistration {
			return []history.ServiceRegistration{func(s grpc.ServiceRegistrar) {
				testpb.RegisterReminderServiceServer(s, reminder.NewHandler(engine))
			}}
		},
	})
	require.NoError(t, err)
	// Publish the address atomically: the parent polls for the file.
	tmp := filepath.Join(dir, crashAddrFile+".tmp")
	require.NoError(t, os.WriteFile(tmp, []byte(h.Server.Address()), 0o600))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, crashAddrFile)))
	select {} // until SIGKILL
}

// TestSurvivesSIGKILL kills a loaded history host with SIGKILL, restarts it on the same file,
// and checks that every acknowledged write survived and every task it produced ran: each
// acknowledged reminder fires (a timer) and is delivered (a side-effect task) after the restart.
func TestSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts subprocesses")
	}
	dir := t.TempDir()

	host := startCrashHelper(t, dir)
	client := testpb.NewReminderServiceClient(dialCrashHelper(t, dir))

	var (
		mu    sync.Mutex
		acked []string
		wg    sync.WaitGroup
	)
	loadCtx, stopLoad := context.WithCancel(context.Background())
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; loadCtx.Err() == nil; i++ {
				id := fmt.Sprintf("w%d-r%d", w, i)
				ctx, cancel := context.WithTimeout(loadCtx, 5*time.Second)
				_, err := client.Schedule(ctx, &testpb.ScheduleRequest{
					NamespaceId: "ns", ReminderId: id, Destination: "inbox",
					Delay: durationpb.New(time.Duration(rand.IntN(400)) * time.Millisecond),
				})
				cancel()
				if err == nil {
					mu.Lock()
					acked = append(acked, id)
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond) // load runs; timers fire and deliveries happen meanwhile
	require.NoError(t, host.Process.Signal(syscall.SIGKILL))
	_ = host.Wait()
	stopLoad()
	wg.Wait()

	mu.Lock()
	ackedIDs := append([]string(nil), acked...)
	mu.Unlock()
	require.NotEmpty(t, ackedIDs, "the load acknowledged nothing before the kill")
	t.Logf("%d reminders acknowledged before SIGKILL", len(ackedIDs))

	require.NoError(t, os.Remove(filepath.Join(dir, crashAddrFile)))
	startCrashHelper(t, dir)
	client = testpb.NewReminderServiceClient(dialCrashHelper(t, dir))

	deadline := time.Now().Add(60 * time.Second)
	for _, id := range ackedIDs {
		for {
			resp, err := client.Describe(context.Background(), &testpb.DescribeRequest{NamespaceId: "ns", ReminderId: id})
			require.NoError(t, err, "acknowledged reminder %s lost", id)
			if resp.GetState().GetStatus() == testpb.ReminderStatus_REMINDER_STATUS_NOTIFIED {
				break
			}
			require.True(t, time.Now().Before(deadline), "reminder %s stuck in %s", id, resp.GetState().GetStatus())
			time.Sleep(20 * time.Millisecond)
		}
	}

	delivered := readDeliveries(t, filepath.Join(dir, crashSinkFile))
	for _, id := range ackedIDs {
		require.True(t, delivered[id], "acknowledged reminder %s was never delivered", id)
	}
}

func startCrashHelper(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelperProcess$", "-test.v=false")
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+dir)
	logFile, err := os.OpenFile(filepath.Join(dir, "helper.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	t.Cleanup(func() { _ = logFile.Close() })
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

func dialCrashHelper(t *testing.T, dir string) *grpc.ClientConn {
	t.Helper()
	var address []byte
	require.Eventually(t, func() bool {
		var err error
		address, err = os.ReadFile(filepath.Join(dir, crashAddrFile))
		return err == nil
	}, 60*time.Second, 20*time.Millisecond, "helper host did not start; see %s", filepath.Join(dir, "helper.log"))
	conn, err := grpc.NewClient(string(address), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// fileSink records deliveries durably (fsync per line): what it wrote before a SIGKILL stays.
type fileSink struct {
	mu sync.Mutex
	f  *os.File
}

func newFileSink(path string) (*fileSink, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &fileSink{f: f}, nil
}

func (s *fileSink) Deliver(_ context.Context, _, reminderID string, fireCount int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := fmt.Fprintf(s.f, "%s %d\n", reminderID, fireCount); err != nil {
		return err
	}
	return s.f.Sync()
}

func readDeliveries(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	out := make(map[string]bool)
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		if id, _, ok := strings.Cut(scanner.Text(), " "); ok {
			out[id] = true
		}
	}
	require.NoError(t, scanner.Err())
	return out
}
