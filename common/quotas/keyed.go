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
// it apply to the very next call. The burst is one second's worth unless the caller gives a
// larger one (AllowBurst). A rate of zero or less, or one that is not finite, means no limit.
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

// Allow takes a token from key's bucket at now; the bucket holds one second's worth.
func (l *KeyedLimiter) Allow(key string, rps float64, now time.Time) bool {
	return l.AllowBurst(key, rps, 0, now)
}

// AllowBurst takes a token from key's bucket at now; the bucket holds burst tokens, or one
// second's worth if that is more. A changed burst, like a changed rate, starts a full bucket.
func (l *KeyedLimiter) AllowBurst(key string, rps float64, burst int, now time.Time) bool {
	if rps <= 0 || math.IsInf(rps, 1) || math.IsNaN(rps) {
		return true
	}
	burst = max(burst, 1, int(min(math.Ceil(rps), math.MaxInt32)))
	l.mu.Lock()
	defer l.mu.Unlock()
	bucket := l.buckets[key]
	if bucket == nil || bucket.Limit() != rate.Limit(rps) || bucket.Burst() != burst {
		if l.maxKeys > 0 && len(l.buckets) >= l.maxKeys {
			l.buckets = make(map[string]*rate.Limiter)
		}
		bucket = rate.NewLimiter(rate.Limit(rps), burst)
		l.buckets[key] = bucket
	}
	return bucket.AllowN(now, 1)
}
