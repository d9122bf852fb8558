package history

import (
	"errors"
	"fmt"
)

// NumShardsDefault is the shard count of a new cluster. It is stored at the first start and
// fixed from then on.
const NumShardsDefault = 16

// Config is the history host's static configuration.
type Config struct {
	// NumShards must equal the count stored at the cluster's first start.
	NumShards int32 `yaml:"numShards"`
	// HostID names this host as a shard owner; defaults to "history".
	HostID string `yaml:"hostID"`
	// ExecutionCacheSize bounds the business IDs each shard keeps in memory.
	ExecutionCacheSize int `yaml:"executionCacheSize"`
	// ExecutionCacheDecodedSize bounds the executions each shard keeps decoded; the other
	// cached ones are kept in their (much smaller) persisted form.
	ExecutionCacheDecodedSize int `yaml:"executionCacheDecodedSize"`
}

// withDefaults returns c with zero fields filled in, validated.
func (c Config) withDefaults() (Config, error) {
	if c.NumShards == 0 {
		c.NumShards = NumShardsDefault
	}
	if c.NumShards < 0 {
		return c, fmt.Errorf("history: numShards must be positive, got %d", c.NumShards)
	}
	if c.HostID == "" {
		c.HostID = "history"
	}
	if c.ExecutionCacheSize < 0 {
		return c, errors.New("history: executionCacheSize must not be negative")
	}
	if c.ExecutionCacheDecodedSize < 0 {
		return c, errors.New("history: executionCacheDecodedSize must not be negative")
	}
	return c, nil
}

// ShardCount returns NumShards, or the default when it is unset.
func (c Config) ShardCount() int32 {
	if c.NumShards == 0 {
		return NumShardsDefault
	}
	return c.NumShards
}
