package dynamicconfig

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"
	"gopkg.in/yaml.v3"

	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/metrics"
)

const (
	// FileClientPollIntervalDefault is how often the file is checked when the config leaves
	// PollInterval zero.
	FileClientPollIntervalDefault = 10 * time.Second
	// FileClientPollIntervalMin keeps a misconfigured interval from turning polling into a busy
	// loop of file reads.
	FileClientPollIntervalMin = 200 * time.Millisecond
)

// FileClientConfig configures a FileClient.
type FileClientConfig struct {
	// Filepath is the YAML file to read.
	Filepath string `yaml:"filepath"`
	// PollInterval is how often the file is checked for changes. Zero means
	// FileClientPollIntervalDefault; anything else must be at least FileClientPollIntervalMin.
	PollInterval time.Duration `yaml:"pollInterval"`
}

// FileClientOption changes an optional part of a FileClient.
type FileClientOption func(*FileClient)

// WithMetricsScope makes the client count rejected reloads as dynamicconfig_reload_errors.
func WithMetricsScope(scope tally.Scope) FileClientOption {
	return func(c *FileClient) { c.scope = scope }
}

// FileClient serves values from a YAML file and reloads the file when its content changes.
//
// The file maps each key to a list of values, each with optional constraints:
//
//	matching.InactiveWorkerCleanupDelay:
//	  - value: 5m
//	    constraints:
//	      namespace: fast-ns
//	  - value: 60m
//
// A file that cannot be read or parsed, or that gives a declared setting a value of the wrong
// type (`value: banana` for a duration), is rejected whole: at construction that is an error; on
// a reload the previous values stay in effect and the reason (key, line, why) is logged.
type FileClient struct {
	config     FileClientConfig
	logger     *zap.Logger
	timeSource clock.TimeSource
	scope      tally.Scope

	mu     sync.RWMutex
	values map[string][]ConstrainedValue // by normalized key

	// reloadMu serializes Reload (the poll loop and explicit calls) and guards the fields below.
	reloadMu sync.Mutex
	hash     [sha256.Size]byte
	// lastFailure identifies the last rejected file content (or read error) so that a file left
	// broken is reported once, not on every poll.
	lastFailure    string
	reportedKeys   map[string]struct{}
	reloadFailures atomic.Int64

	lifecycleMu sync.Mutex
	started     bool
	stopped     bool
	stopCh      chan struct{}
	doneCh      chan struct{}

	testSignals fileClientTestSignals
}

// NewFileClient reads cfg.Filepath and returns a client serving its values. Call Start to poll
// the file for changes and Stop to end polling.
func NewFileClient(cfg FileClientConfig, logger *zap.Logger, timeSource clock.TimeSource, opts ...FileClientOption) (*FileClient, error) {
	if cfg.Filepath == "" {
		return nil, errors.New("dynamicconfig: file client needs a file path")
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = FileClientPollIntervalDefault
	}
	if cfg.PollInterval < FileClientPollIntervalMin {
		return nil, fmt.Errorf("dynamicconfig: poll interval %v is below the minimum %v", cfg.PollInterval, FileClientPollIntervalMin)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	if timeSource == nil {
		timeSource = clock.NewRealTimeSource()
	}
	c := &FileClient{
		config:       cfg,
		logger:       logger.With(tag.Component("dynamicconfig")),
		timeSource:   timeSource,
		scope:        metrics.NoopScope,
		values:       map[string][]ConstrainedValue{},
		reportedKeys: map[string]struct{}{},
		stopCh:       make(chan struct{}),
		doneCh:       make(chan struct{}),
	}
	for _, opt := range opts {
		opt(c)
	}

	content, err := os.ReadFile(cfg.Filepath)
	if err != nil {
		return nil, fmt.Errorf("dynamicconfig: %w", err)
	}
	values, err := parseFile(content)
	if err != nil {
		return nil, fmt.Errorf("dynamicconfig: %s: %w", cfg.Filepath, err)
	}
	c.hash = sha256.Sum256(content)
	c.install(values)
	return c, nil
}

// GetValue implements Client.
func (c *FileClient) GetValue(key Key) []ConstrainedValue {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.values[key.normalized()]
}

// ReloadFailures returns how many times a changed file was rejected since the client was made.
// A file that stays broken counts once.
func (c *FileClient) ReloadFailures() int64 { return c.reloadFailures.Load() }

// Reload reads the file now and, if its content changed and parses, serves the new values. On an
// error the previous values stay in effect. The poll loop calls it; tests may call it directly.
func (c *FileClient) Reload() error {
	c.reloadMu.Lock()
	defer c.reloadMu.Unlock()

	content, err := os.ReadFile(c.config.Filepath)
	if err != nil {
		c.rejected("read:"+err.Error(), err)
		return fmt.Errorf("dynamicconfig: %w", err)
	}
	hash := sha256.Sum256(content)
	if hash == c.hash {
		return nil
	}
	values, err := parseFile(content)
	if err != nil {
		c.rejected(fmt.Sprintf("content:%x", hash), err)
		return fmt.Errorf("dynamicconfig: %s: %w", c.config.Filepath, err)
	}
	c.hash = hash
	c.lastFailure = ""
	c.install(values)
	c.logger.Info("dynamic config reloaded", zap.String("file", c.config.Filepath), zap.Int("keys", len(values)))
	return nil
}

func (c *FileClient) rejected(failure string, err error) {
	if failure == c.lastFailure {
		return
	}
	c.lastFailure = failure
	c.reloadFailures.Add(1)
	metrics.DynamicConfigReloadErrors.With(c.scope).Inc(1)
	c.logger.Error("dynamic config file rejected, keeping the previous values",
		zap.String("file", c.config.Filepath), tag.Error(err))
}

// install swaps in new values; the caller holds reloadMu (or is the constructor).
func (c *FileClient) install(values map[string]fileKey) {
	served := make(map[string][]ConstrainedValue, len(values))
	for k, fk := range values {
		served[k] = fk.values
		if _, ok := c.reportedKeys[k]; !ok && !IsDeclared(Key(k)) {
			c.reportedKeys[k] = struct{}{}
			c.logger.Info("dynamic config file has a key no setting reads (kept; check for a typo)",
				tag.Key(fk.key))
		}
	}
	c.mu.Lock()
	c.values = served
	c.mu.Unlock()
}

// Start begins polling the file every PollInterval. It does nothing if the client was already
// started or stopped.
func (c *FileClient) Start() {
	c.lifecycleMu.Lock()
	defer c.lifecycleMu.Unlock()
	if c.started || c.stopped {
		return
	}
	c.started = true
	go c.pollLoop()
}

// Stop ends polling and returns once the polling goroutine has exited. It is safe to call more
// than once, and without Start.
func (c *FileClient) Stop() {
	c.lifecycleMu.Lock()
	if c.stopped {
		c.lifecycleMu.Unlock()
		return
	}
	c.stopped = true
	started := c.started
	close(c.stopCh)
	c.lifecycleMu.Unlock()

	if started {
		<-c.doneCh
	}
}

func (c *FileClient) pollLoop() {
	defer close(c.doneCh)
	for {
		// A fresh timer per round, armed after the previous reload finished: a slow read never
		// causes reloads to queue up behind each other.
		fired, timer := c.timeSource.NewTimer(c.config.PollInterval)
		c.testSignals.timerArmed.signal(struct{}{})
		select {
		case <-c.stopCh:
			timer.Stop()
			return
		case <-fired:
			// Errors are logged and counted by Reload.
			err := c.Reload()
			c.testSignals.polled.signal(err)
		}
	}
}

// fileKey is one key's values as parsed, with the key as written in the file.
type fileKey struct {
	key    string
	values []ConstrainedValue
}

// fileEntry is one list item under a key.
type fileEntry struct {
	Value       yaml.Node        `yaml:"value"`
	Constraints *fileConstraints `yaml:"constraints"`
}

// fileConstraints lists the constraints a file may use. Decoding with KnownFields makes any other
// constraint (a typo, or a Temporal constraint vigil does not support) an error: silently
// ignoring it would apply a value meant for one namespace to all of them.
type fileConstraints struct {
	Namespace *string `yaml:"namespace"`
}

func parseFile(content []byte) (map[string]fileKey, error) {
	var raw map[string][]fileEntry
	dec := yaml.NewDecoder(bytes.NewReader(content))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}

	out := make(map[string]fileKey, len(raw))
	for key, entries := range raw {
		if strings.TrimSpace(key) == "" {
			return nil, errors.New("empty key")
		}
		norm := Key(key).normalized()
		if prev, ok := out[norm]; ok {
			return nil, fmt.Errorf("keys %q and %q differ only in case; keys are case-insensitive", prev.key, key)
		}
		values := make([]ConstrainedValue, 0, len(entries))
		for i, e := range entries {
			if e.Value.Kind == 0 {
				return nil, fmt.Errorf("key %q, item %d: missing \"value\"", key, i+1)
			}
			var v any
			if err := e.Value.Decode(&v); err != nil {
				return nil, fmt.Errorf("key %q, item %d (line %d): %w", key, i+1, e.Value.Line, err)
			}
			// The setting's own type check: a value it cannot use rejects the file.
			if err := ValidateValue(Key(key), v); err != nil {
				return nil, fmt.Errorf("key %q, item %d (line %d): value %v: %w", key, i+1, e.Value.Line, v, err)
			}
			var cons Constraints
			if e.Constraints != nil && e.Constraints.Namespace != nil {
				if *e.Constraints.Namespace == "" {
					return nil, fmt.Errorf("key %q, item %d: empty namespace constraint (omit constraints to apply to all namespaces)", key, i+1)
				}
				cons.Namespace = *e.Constraints.Namespace
			}
			values = append(values, ConstrainedValue{Constraints: cons, Value: v})
		}
		out[norm] = fileKey{key: key, values: values}
	}
	return out, nil
}

// fileClientTestSignals lets tests wait for the poll loop instead of sleeping. Signals are
// nil (and free) unless a test calls init.
type fileClientTestSignals struct {
	timerArmed testSignal[struct{}]
	polled     testSignal[error]
}

func (s *fileClientTestSignals) init() {
	s.timerArmed = make(testSignal[struct{}], 100)
	s.polled = make(testSignal[error], 100)
}

type testSignal[T any] chan T

func (s testSignal[T]) signal(v T) {
	if s == nil {
		return
	}
	select {
	case s <- v:
	default:
	}
}
