package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// TLSConfig is the static configuration of a TLS listener ("tls:" in the server's YAML).
type TLSConfig struct {
	// CertFile and KeyFile are the server's certificate chain and private key (PEM). Both
	// are re-read when they change: a renewed certificate is served to new connections
	// without a restart.
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
	// ClientCAFile holds the CAs client certificates are verified against (PEM), also
	// re-read on change. Set, a client certificate that chains to it names the principal
	// (mTLS); see RequireClientCert.
	ClientCAFile string `yaml:"clientCAFile"`
	// RequireClientCert refuses connections without a valid client certificate. Without it a
	// client may connect with only a bearer token.
	RequireClientCert bool `yaml:"requireClientCert"`
}

// Enabled reports whether the listener serves TLS.
func (c TLSConfig) Enabled() bool { return c.CertFile != "" || c.KeyFile != "" }

// tlsReloadInterval bounds how often certificate files are checked for changes.
const tlsReloadInterval = time.Second

// NewServerTLSConfig returns a tls.Config that re-reads the certificate, key and client CA
// files when they change. A change that does not load (a certificate written before its key)
// keeps the previous pair and is logged.
func NewServerTLSConfig(cfg TLSConfig, logger *zap.Logger) (*tls.Config, error) {
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, errors.New("tls: both certFile and keyFile are required")
	}
	if cfg.RequireClientCert && cfg.ClientCAFile == "" {
		return nil, errors.New("tls: requireClientCert needs clientCAFile")
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	pair, err := newWatchedFile(tlsReloadInterval, func(c [][]byte) (*tls.Certificate, error) {
		cert, err := tls.X509KeyPair(c[0], c[1])
		return &cert, err
	}, cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: certificate %s / key %s: %w", cfg.CertFile, cfg.KeyFile, err)
	}
	var clientCAs *watchedFile[*x509.CertPool]
	if cfg.ClientCAFile != "" {
		clientCAs, err = newWatchedFile(tlsReloadInterval, func(c [][]byte) (*x509.CertPool, error) {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(c[0]) {
				return nil, errors.New("no PEM certificate found")
			}
			return pool, nil
		}, cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: client CA %s: %w", cfg.ClientCAFile, err)
		}
	}
	clientAuth := tls.NoClientCert
	switch {
	case cfg.RequireClientCert:
		clientAuth = tls.RequireAndVerifyClientCert
	case clientCAs != nil:
		clientAuth = tls.VerifyClientCertIfGiven
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: clientAuth, NextProtos: []string{"h2", "http/1.1"}}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			now := time.Now()
			cert, err := pair.get(now)
			if err != nil {
				logger.Warn("tls: reloading the certificate failed; serving the previous one", zap.Error(err))
			}
			c := base.Clone()
			c.Certificates = []tls.Certificate{*cert}
			if clientCAs != nil {
				pool, err := clientCAs.get(now)
				if err != nil {
					logger.Warn("tls: reloading the client CA failed; using the previous one", zap.Error(err))
				}
				c.ClientCAs = pool
			}
			return c, nil
		},
	}, nil
}
