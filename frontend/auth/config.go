package auth

import (
	"fmt"
	"os"
	"strings"
)

// Config is the static configuration of authentication ("auth:" in the server's YAML).
type Config struct {
	// Enabled turns authentication and authorization on. Off by default, as in `temporal
	// server start-dev`: every caller may do everything.
	Enabled bool `yaml:"enabled"`
	// AdminAPIKeyFile holds a cluster admin API key (the first one: it creates the others with
	// `vigil apikey create`). Only the file's first line is read; the key is never logged.
	AdminAPIKeyFile string `yaml:"adminAPIKeyFile"`
	// AdminAPIKey is the same, inline. Prefer the file.
	AdminAPIKey string `yaml:"adminAPIKey"`
	// JWT enables bearer JWTs when JWT.JWKSFile is set.
	JWT JWTConfig `yaml:"jwt"`
	// TLSPermissions maps client certificate names (subject CN, DNS/URI/email SAN) to
	// permissions "<namespace>:<role>"; see DefaultClaimMapper.
	TLSPermissions map[string][]string `yaml:"tlsPermissions"`
}

// StaticAdminKeys returns the configured admin keys (file and inline).
func (c Config) StaticAdminKeys() ([]string, error) {
	var keys []string
	if c.AdminAPIKey != "" {
		keys = append(keys, c.AdminAPIKey)
	}
	if c.AdminAPIKeyFile != "" {
		b, err := os.ReadFile(c.AdminAPIKeyFile)
		if err != nil {
			return nil, fmt.Errorf("auth: admin API key file: %w", err)
		}
		key, _, _ := strings.Cut(string(b), "\n")
		key = strings.TrimSpace(key)
		if len(key) < 16 {
			return nil, fmt.Errorf("auth: admin API key file %s: the key must be at least 16 characters", c.AdminAPIKeyFile)
		}
		keys = append(keys, key)
	}
	return keys, nil
}
