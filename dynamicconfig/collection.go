package dynamicconfig

import (
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/log/tag"
)

// maxWarnedValues bounds the memory spent remembering which bad values were already logged.
const maxWarnedValues = 4096

// Collection turns declared settings into getters backed by a Client. It is safe for concurrent
// use; one Collection serves the whole process.
type Collection struct {
	client Client
	logger *zap.Logger

	warnedMu sync.Mutex
	// warned remembers key+value pairs already reported as unconvertible: a getter on a hot path
	// would otherwise log the same warning on every call.
	warned map[string]struct{}
}

// NewCollection returns a Collection reading from client.
func NewCollection(client Client, logger *zap.Logger) *Collection {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Collection{client: client, logger: logger, warned: make(map[string]struct{})}
}

// NewNoopCollection returns a Collection in which every setting has its default value.
func NewNoopCollection() *Collection {
	return NewCollection(NewMemoryClient(), zap.NewNop())
}

// lookup returns the value that applies to namespace ("" for a global setting): a value
// constrained to exactly this namespace beats an unconstrained one; among equals the client's
// first wins. Values constrained to another namespace never apply.
func (c *Collection) lookup(key Key, namespace string) (any, bool) {
	var (
		best      any
		found     bool
		bestScore int
	)
	for _, cv := range c.client.GetValue(key) {
		score := 0
		switch cv.Constraints.Namespace {
		case "":
			score = 1
		case namespace:
			score = 2
		default:
			continue
		}
		if score > bestScore {
			best, found, bestScore = cv.Value, true, score
		}
	}
	return best, found
}

func (c *Collection) warnConversion(key Key, value any, def any, err error) {
	id := fmt.Sprintf("%s\x00%T\x00%v", key.normalized(), value, value)
	c.warnedMu.Lock()
	if _, ok := c.warned[id]; ok {
		c.warnedMu.Unlock()
		return
	}
	if len(c.warned) >= maxWarnedValues {
		clear(c.warned)
	}
	c.warned[id] = struct{}{}
	c.warnedMu.Unlock()

	c.logger.Warn("dynamic config value cannot be used, using the default",
		tag.Key(key.String()),
		zap.Any("value", value),
		zap.Any("default", def),
		tag.Error(err))
}

func get[T any](c *Collection, key Key, namespace string, def T, convert func(any) (T, error)) T {
	raw, ok := c.lookup(key, namespace)
	if !ok {
		return def
	}
	v, err := convert(raw)
	if err != nil {
		c.warnConversion(key, raw, def, err)
		return def
	}
	return v
}
