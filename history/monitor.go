package history

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/membership"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/persistence"
)

// Membership timings: a host renews its row every heartbeat and is dead once its row is a TTL
// old. The TTL must allow a couple of missed renewals.
const (
	MembershipHeartbeatDefault = time.Second
	MembershipTTLDefault       = 3 * time.Second
)

// ClusterConfig is the static configuration of this host as a cluster member (the `cluster:`
// block of the server YAML).
type ClusterConfig struct {
	// HostID names the host in the cluster and as a shard owner; unique within the cluster and
	// stable across restarts. The server defaults it to hostname:port.
	HostID string `yaml:"hostID"`
	// HistoryAddress is where other hosts reach this host's history RPCs; defaults to the
	// address the history server listens on (which must then be reachable from them).
	HistoryAddress string `yaml:"historyAddress"`
	// FrontendAddress is where SDKs reach this host, as shown by `vigil cluster describe`.
	FrontendAddress     string        `yaml:"frontendAddress"`
	MembershipHeartbeat time.Duration `yaml:"membershipHeartbeat"`
	MembershipTTL       time.Duration `yaml:"membershipTTL"`
}

func (c ClusterConfig) withDefaults() (ClusterConfig, error) {
	if c.MembershipHeartbeat == 0 {
		c.MembershipHeartbeat = MembershipHeartbeatDefault
	}
	if c.MembershipTTL == 0 {
		c.MembershipTTL = MembershipTTLDefault
	}
	if c.MembershipHeartbeat < 0 || c.MembershipTTL < 2*c.MembershipHeartbeat {
		return c, fmt.Errorf("cluster: membershipTTL (%s) must be at least twice membershipHeartbeat (%s)",
			c.MembershipTTL, c.MembershipHeartbeat)
	}
	return c, nil
}

// StoreMonitor is the membership of a cluster that shares one database: each host renews its
// row through the same store it writes its shards to, so a host that cannot reach the database
// also stops counting itself as a member: the claim is tied to what the host can do.
//
// It learns of other hosts by polling every heartbeat and, for joins and leaves, by the
// store's notifications. Members() leaves this host out once its own renewal is more than
// TTL - heartbeat/2 old: the shard controller then stops serving every shard, before any
// other host can read the row as expired (its expiry is at least a TTL after the renewal
// was sent).
type StoreMonitor struct {
	store  persistence.MembershipStore
	cfg    ClusterConfig
	logger *zap.Logger
	scope  tally.Scope

	mu   sync.Mutex
	self membership.Host
	// members is the last list read from the store.
	members []membership.Host
	// renewedAt is when the last successful renewal was sent (this host's monotonic clock).
	renewedAt time.Time
	// lapsed is set while this host's own renewal is too old to count itself a member.
	lapsed bool
	// epoch, renewedNanos (renewedAt as nanoseconds after epoch, plus one; 0 before the first
	// renewal) and fenced (lapsed) let Serving, asked on every call, read without the lock.
	epoch        time.Time
	renewedNanos atomic.Int64
	fenced       atomic.Bool
	// renewAnsweredAt is when the last successful renewal's answer came back (this host's
	// monotonic clock): the database's clock read self.LastRenewal no later than that.
	renewAnsweredAt time.Time
	// renewalsPaused stops the membership loop alone (PauseRenewals).
	renewalsPaused atomic.Bool
	subs           map[int]chan struct{}
	nextID         int

	refresh chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup

	// loads, when set, rides on the membership rows: this host's load report goes with each
	// renewal, and the other hosts' reports come back with each read of the members.
	loads LoadExchange
}

var _ membership.Monitor = (*StoreMonitor)(nil)

// LoadExchange is what the membership carries between the hosts of a cluster for their expiry
// brakes: whether each is behind (overload.Controller).
type LoadExchange interface {
	// Report is this host's load report, stored with its membership row.
	Report() []byte
	// Received takes the other live hosts' reports, by host ID.
	Received(reports map[string][]byte)
}

// SetLoadExchange makes the membership carry load reports; call before Start.
func (m *StoreMonitor) SetLoadExchange(x LoadExchange) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loads = x
}

// NewStoreMonitor returns a monitor of self; nothing happens until Start.
func NewStoreMonitor(store persistence.MembershipStore, cfg ClusterConfig, self membership.Host, logger *zap.Logger, scope tally.Scope) (*StoreMonitor, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if self.ID == "" {
		return nil, fmt.Errorf("cluster: host ID is empty")
	}
	if scope == nil {
		scope = tally.NoopScope
	}
	return &StoreMonitor{
		store: store, cfg: cfg, self: self, logger: logger.With(zap.String("host", self.ID)), scope: scope,
		subs: make(map[int]chan struct{}), refresh: make(chan struct{}, 1), stop: make(chan struct{}),
		epoch: time.Now(),
	}, nil
}

// SetAddresses fills in addresses known only once the servers listen; call before Start.
func (m *StoreMonitor) SetAddresses(historyAddress, frontendAddress string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if historyAddress != "" {
		m.self.HistoryAddress = historyAddress
	}
	if frontendAddress != "" {
		m.self.FrontendAddress = frontendAddress
	}
}

// Start registers this host and reads the members; it fails if the store cannot be reached.
func (m *StoreMonitor) Start(ctx context.Context) error {
	m.mu.Lock()
	m.self.StartTime = time.Now()
	m.mu.Unlock()
	if err := m.renew(ctx); err != nil {
		return err
	}
	if err := m.list(ctx); err != nil {
		return err
	}
	m.logger.Info("joined the cluster", zap.Int("members", len(m.Members())))
	watchCtx, cancelWatch := context.WithCancel(context.Background())
	m.wg.Add(3)
	go func() { defer m.wg.Done(); m.renewLoop() }()
	go func() { defer m.wg.Done(); m.lapseLoop() }()
	go func() { defer m.wg.Done(); m.watchLoop(watchCtx) }()
	go func() { <-m.stop; cancelWatch() }()
	return nil
}

// Stop stops renewing and, when leave is set, removes this host's row so that the others
// take its shards at once instead of after the TTL.
func (m *StoreMonitor) Stop(ctx context.Context, leave bool) {
	select {
	case <-m.stop:
		return
	default:
	}
	close(m.stop)
	m.wg.Wait()
	if !leave {
		return
	}
	// Whatever the store says, this host no longer counts itself: calls it still routes go to
	// the others.
	m.mu.Lock()
	m.lapsed = true
	m.fenced.Store(true)
	m.mu.Unlock()
	m.publish()
	if err := m.store.RemoveMember(ctx, m.Self().ID); err != nil {
		m.logger.Warn("could not leave the cluster; the others wait for the membership TTL", tag.Error(err))
		return
	}
	m.logger.Info("left the cluster")
}

func (m *StoreMonitor) loadExchange() LoadExchange {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.loads
}

// Self implements membership.Monitor.
func (m *StoreMonitor) Self() membership.Host {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.self
}

// Members implements membership.Monitor.
func (m *StoreMonitor) Members() []membership.Host {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.membersLocked()
}

func (m *StoreMonitor) membersLocked() []membership.Host {
	serving := m.Serving()
	out := make([]membership.Host, 0, len(m.members))
	for _, h := range m.members {
		if h.ID == m.self.ID && !serving {
			continue
		}
		out = append(out, h)
	}
	return out
}

// Serving reports whether this host may still serve its shards: it is fenced off them from
// the moment its last successful renewal was sent TTL - heartbeat/2 ago, whatever its loops
// are doing. No other host can read its row as expired before that renewal is a TTL old (the
// database set its expiry a TTL after receiving it), so this host has stopped before any other
// may take its shards (docs/failover.md states the bound).
func (m *StoreMonitor) Serving() bool {
	renewed := m.renewedNanos.Load()
	return renewed != 0 && !m.fenced.Load() && time.Since(m.epoch)-time.Duration(renewed-1) <= m.fenceAfter()
}

// fenceAfter is how long after sending its last successful renewal this host stops serving.
func (m *StoreMonitor) fenceAfter() time.Duration {
	return m.cfg.MembershipTTL - m.cfg.MembershipHeartbeat/2
}

// Subscribe implements membership.Monitor.
func (m *StoreMonitor) Subscribe() (<-chan struct{}, func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := m.nextID
	m.nextID++
	ch := make(chan struct{}, 1)
	m.subs[id] = ch
	return ch, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.subs, id)
	}
}

// Refresh makes the monitor read the members now (tests and the shard controller use it
// after a change they caused).
func (m *StoreMonitor) Refresh() {
	select {
	case m.refresh <- struct{}{}:
	default:
	}
}

func (m *StoreMonitor) renew(ctx context.Context) error {
	self := m.Self()
	sent := time.Now()
	ctx, cancel := context.WithTimeout(ctx, m.cfg.MembershipHeartbeat)
	defer cancel()
	var load []byte
	if x := m.loadExchange(); x != nil {
		load = x.Report()
	}
	row, err := m.store.RenewMember(ctx, persistence.ClusterMember{
		HostID: self.ID, HistoryAddress: self.HistoryAddress, FrontendAddress: self.FrontendAddress, StartTime: self.StartTime,
		Load: load,
	}, m.cfg.MembershipTTL)
	if err != nil {
		return fmt.Errorf("cluster: renew membership of %s: %w", self.ID, err)
	}
	m.mu.Lock()
	m.renewedAt = sent
	m.renewAnsweredAt = time.Now()
	m.renewedNanos.Store(int64(sent.Sub(m.epoch)) + 1)
	m.self.LastRenewal, m.self.Expiry = row.LastRenewal, row.Expiry
	wasLapsed := m.lapsed
	m.lapsed = false
	m.fenced.Store(false)
	m.mu.Unlock()
	if wasLapsed {
		m.logger.Warn("membership renewed again after it lapsed: this host rejoins the cluster")
		m.publish()
	}
	return nil
}

func (m *StoreMonitor) list(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.MembershipHeartbeat)
	defer cancel()
	rows, err := m.store.ListMembers(ctx)
	if err != nil {
		return fmt.Errorf("cluster: list members: %w", err)
	}
	members := make([]membership.Host, len(rows))
	reports := make(map[string][]byte, len(rows))
	selfID := m.Self().ID
	for i, r := range rows {
		members[i] = membership.Host{
			ID: r.HostID, HistoryAddress: r.HistoryAddress, FrontendAddress: r.FrontendAddress,
			StartTime: r.StartTime, LastRenewal: r.LastRenewal, Expiry: r.Expiry,
		}
		if r.HostID != selfID {
			reports[r.HostID] = r.Load
		}
	}
	if x := m.loadExchange(); x != nil {
		x.Received(reports)
	}
	m.mu.Lock()
	changed := !sameHosts(m.members, members)
	m.members = members
	m.mu.Unlock()
	metrics.ClusterHostsAlive.With(m.scope).Update(float64(len(members)))
	if changed {
		m.logger.Info("cluster membership changed", zap.Strings("members", hostIDs(members)))
		m.publish()
	}
	return nil
}

// sameHosts compares the parts of a member list that decide ownership and routing.
func sameHosts(a, b []membership.Host) bool {
	return slices.EqualFunc(a, b, func(x, y membership.Host) bool {
		return x.ID == y.ID && x.HistoryAddress == y.HistoryAddress && x.StartTime.Equal(y.StartTime)
	})
}

func hostIDs(hosts []membership.Host) []string {
	out := make([]string, len(hosts))
	for i, h := range hosts {
		out[i] = h.ID
	}
	return out
}

func (m *StoreMonitor) publish() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ch := range m.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (m *StoreMonitor) renewLoop() {
	ticker := time.NewTicker(m.cfg.MembershipHeartbeat)
	defer ticker.Stop()
	// expiryRead reads the members again just after the next expiry of another member's row,
	// rather than at the next tick: a host that stopped renewing is seen gone (and its shards
	// taken) up to a heartbeat sooner.
	expiryRead := time.NewTimer(time.Hour)
	defer expiryRead.Stop()
	for {
		if d, ok := m.untilNextExpiry(); ok {
			expiryRead.Reset(d)
		}
		select {
		case <-m.stop:
			return
		case <-expiryRead.C:
			if m.renewalsPaused.Load() {
				continue
			}
		case <-ticker.C:
			if m.renewalsPaused.Load() {
				continue
			}
			if err := m.renew(context.Background()); err != nil {
				m.logger.Warn("membership renewal failed", tag.Error(err))
			}
		case <-m.refresh:
			if m.renewalsPaused.Load() {
				continue
			}
		}
		if err := m.list(context.Background()); err != nil {
			m.logger.Warn("membership read failed", tag.Error(err))
		}
	}
}

// expiryReadSlack is how long after another member's expiry (as this host estimates it) the
// members are read again.
const expiryReadSlack = 20 * time.Millisecond

// untilNextExpiry returns how long until just after the earliest expiry of another member's
// row, if that comes before the next heartbeat. Expiries are the database's clock: the delay is
// the row's expiry less the database's time of this host's last renewal, counted from when
// that renewal's answer arrived, so this host's clock offset does not enter.
func (m *StoreMonitor) untilNextExpiry() (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.renewAnsweredAt.IsZero() || m.self.LastRenewal.IsZero() {
		return 0, false
	}
	var next time.Duration
	found := false
	for _, h := range m.members {
		if h.ID == m.self.ID || h.Expiry.IsZero() {
			continue
		}
		d := time.Until(m.renewAnsweredAt.Add(h.Expiry.Sub(m.self.LastRenewal))) + expiryReadSlack
		if d > 0 && d < m.cfg.MembershipHeartbeat && (!found || d < next) {
			next, found = d, true
		}
	}
	return next, found
}

// PauseRenewals stops (true) or resumes the membership loop alone — no renewal, no read of
// the members — while the host goes on serving: the fault of a host whose renewals stall while
// the rest of it works. A test hook (VIGIL_TEST_HOOKS, testhooks.go); the self-fence must
// take the host off its shards before the others take them.
func (m *StoreMonitor) PauseRenewals(paused bool) {
	m.renewalsPaused.Store(paused)
	m.logger.Warn("membership renewals paused by a test hook", zap.Bool("paused", paused))
}

// lapseLoop drops this host from its own view once its renewal is too old, independently of
// the renewal itself, which may hang on a database that does not answer.
func (m *StoreMonitor) lapseLoop() {
	limit := m.fenceAfter()
	ticker := time.NewTicker(m.cfg.MembershipHeartbeat / 4)
	defer ticker.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-ticker.C:
		}
		m.mu.Lock()
		since := time.Since(m.renewedAt)
		lapse := !m.lapsed && since > limit
		if lapse {
			m.lapsed = true
			m.fenced.Store(true)
		}
		m.mu.Unlock()
		if lapse {
			m.logger.Error("membership not renewed within the TTL: this host stops serving its shards",
				zap.Duration("since-renewal", since))
			m.publish()
		}
	}
}

func (m *StoreMonitor) watchLoop(ctx context.Context) {
	backoff := m.cfg.MembershipHeartbeat
	for ctx.Err() == nil {
		err := m.store.WatchMembers(ctx, m.Refresh)
		if ctx.Err() != nil {
			return
		}
		m.logger.Debug("membership watch ended; polling covers it", tag.Error(err))
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
	}
}
