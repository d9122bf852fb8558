package bench

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A store's CPU is its whole process tree's: a PostgreSQL server does its work in backends, the
// postmaster's children. The children's CPU counts while they run and once they are reaped.
func TestTreeCPUCountsTheChildren(t *testing.T) {
	child := exec.Command("sh", "-c", "while :; do :; done")
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })

	// The child's first ticks are a state to wait for, however loaded the machine.
	var childTicks float64
	require.Eventually(t, func() bool {
		ticks, err := readCPUTicks(child.Process.Pid)
		childTicks = ticks
		return err == nil && ticks >= 5
	}, 5*time.Minute, 20*time.Millisecond)

	own, err := readCPUTicks(os.Getpid())
	require.NoError(t, err)
	tree, err := readTreeCPUTicks(os.Getpid())
	require.NoError(t, err)
	require.GreaterOrEqual(t, tree, own+childTicks, "a running child's CPU is counted")

	stat, err := readStat(child.Process.Pid)
	require.NoError(t, err)
	require.Equal(t, os.Getpid(), stat.ppid)

	require.NoError(t, child.Process.Kill())
	_ = child.Wait() // reaped: its CPU moves into this process's cutime and cstime
	tree, err = readTreeCPUTicks(os.Getpid())
	require.NoError(t, err)
	require.GreaterOrEqual(t, tree, own+childTicks, "a reaped child's CPU is still counted")

	_, err = readTreeCPUTicks(-1)
	require.Error(t, err, "no such process")
}
