// Package quotas holds the token buckets vigil limits its callers with.
package quotas

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// KeyedLimiter keeps one token bucket per key (a namespace, a principal). The rate comes with
// every call, read from dynamic config by the caller, so a change applies at once: a changed
// rate starts with a full bucket, and an operator who raises the limit of a throttled key sees
// it apply to the very next call. The burst is one second's worth. A rate of zero or less, or
// one that is not finite, means no limit.
type KeyedLimiter struct {
	maxKeys int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// NewKeyedLimiter keeps at most maxKeys buckets (0: no bound, for keys from a closed set);
// past it, every bucket starts over full, so keys the caller does not control cannot grow it
// without end.
func NewKeyedLimiter(maxKeys int) *KeyedLimiter {
	return &KeyedLimiter{maxKeys: maxKeys, buckets: make(map[string]*rate.Limiter)}
}

// Allow takes a token from key's bucket at now.
func (l *KeyedLimiter) Allow(key string, rps float64, now time.Time) bool {
	if rps <= 0 || math.IsInf(rps, 1) || math.IsNaN(rps) {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	bucket := l.buckets[key]
	if bucket == nil || bucket.Limit() != rate.Limit(rps) {
		if l.maxKeys > 0 && len(l.buckets) >= l.maxKeys {
			l.buckets = make(map[string]*rate.Limiter)
		}
		bucket = rate.NewLimiter(rate.Limit(rps), max(1, int(math.Ceil(rps))))
		l.buckets[key] = bucket
	}
	return bucket.AllowN(now, 1)
}
