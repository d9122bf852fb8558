package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicksPerSecond is USER_HZ, the unit of utime and stime in /proc/PID/stat. It is 100 on
// every Linux architecture Go supports; reading it properly would need cgo (sysconf).
const clockTicksPerSecond = 100

// ProcStats is what a process cost during the run.
type ProcStats struct {
	PID        int     `json:"pid"`
	MaxRSSMiB  float64 `json:"max_rss_mib"`
	MeanCPUPct float64 `json:"mean_cpu_pct"` // percent of one core, averaged over the run
	MaxCPUPct  float64 `json:"max_cpu_pct"`  // the busiest one-second sample
	Samples    int     `json:"samples"`
	Error      string  `json:"error,omitempty"`
}

// procSampler reads /proc/PID/{status,stat} once a second.
type procSampler struct {
	pid  int
	quit chan struct{}
	done chan struct{}

	mu        sync.Mutex
	stats     ProcStats
	firstTick float64
	firstAt   time.Time
	lastTick  float64
	lastAt    time.Time
}

func startProcSampler(pid int) *procSampler {
	p := &procSampler{pid: pid, quit: make(chan struct{}), done: make(chan struct{})}
	p.stats.PID = pid
	p.sample()
	go p.loop()
	return p
}

func (p *procSampler) loop() {
	defer close(p.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-p.quit:
			p.sample()
			return
		case <-t.C:
			p.sample()
		}
	}
}

func (p *procSampler) sample() {
	rss, rssErr := readRSSBytes(p.pid)
	ticks, cpuErr := readCPUTicks(p.pid)
	// The time is read after the ticks: a sampler stalled between the two (its own process
	// overloaded) would otherwise credit the stall's CPU to a shorter interval.
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := firstErr(rssErr, cpuErr); err != nil {
		p.stats.Error = err.Error()
		return
	}
	p.stats.Samples++
	p.stats.MaxRSSMiB = max(p.stats.MaxRSSMiB, float64(rss)/(1<<20))
	if p.firstAt.IsZero() {
		p.firstTick, p.firstAt = ticks, now
	} else if dt := now.Sub(p.lastAt).Seconds(); dt > 0.5 {
		p.stats.MaxCPUPct = max(p.stats.MaxCPUPct, 100*(ticks-p.lastTick)/clockTicksPerSecond/dt)
	}
	p.lastTick, p.lastAt = ticks, now
	if dt := now.Sub(p.firstAt).Seconds(); dt > 0 {
		p.stats.MeanCPUPct = 100 * (ticks - p.firstTick) / clockTicksPerSecond / dt
	}
}

func (p *procSampler) stop() ProcStats {
	close(p.quit)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

func readRSSBytes(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			fields := strings.Fields(rest) // "123456 kB"
			if len(fields) == 2 && fields[1] == "kB" {
				kb, err := strconv.ParseInt(fields[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmRSS line", pid)
}

// readCPUTicks returns utime + stime.
func readCPUTicks(pid int) (float64, error) {
	f, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	return f.utime + f.stime, nil
}

// readTreeCPUTicks returns the CPU of pid and of its children: its own utime + stime, that of
// the children it has reaped (cutime + cstime), and that of the children still running. A
// PostgreSQL server is such a tree, one level deep: the postmaster, a backend per connection
// and its background writers. A child reaped between the reading of pid and the scan of /proc
// is missed by this reading and counted by the next.
func readTreeCPUTicks(pid int) (float64, error) {
	root, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	ticks := root.utime + root.stime + root.cutime + root.cstime
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		f, err := readStat(child)
		if err != nil || f.ppid != pid {
			continue // exited since the listing, or not a child
		}
		ticks += f.utime + f.stime
	}
	return ticks, nil
}

// procStat is what vigil bench reads of /proc/PID/stat, CPU times in USER_HZ ticks.
type procStat struct {
	ppid                         int
	utime, stime, cutime, cstime float64
}

// readStat reads /proc/PID/stat. The command name (field 2) may hold spaces and parentheses,
// so fields are counted from the last ')'.
func readStat(pid int) (procStat, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	fields := strings.Fields(string(data[i+1:]))
	// fields[0] is field 3 (state); ppid is field 4, utime to cstime fields 14 to 17.
	if len(fields) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	f := procStat{ppid: ppid}
	for j, dst := range []*float64{&f.utime, &f.stime, &f.cutime, &f.cstime} {
		if *dst, err = strconv.ParseFloat(fields[11+j], 64); err != nil {
			return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
	}
	return f, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
