package auth

import (
	"bytes"
	"os"
	"sync"
	"time"
)

// watchedFile re-reads files when they change, checked at most once per interval, on use: a
// certificate or a JWKS replaced on disk takes effect without a restart and without a
// background goroutine. A file that cannot be read or parsed keeps the previous value (an
// operator mid-way through replacing a certificate must not take the server down), and the
// error is returned so the caller can log it.
type watchedFile[T any] struct {
	paths    []string
	interval time.Duration
	parse    func(contents [][]byte) (T, error)

	mu        sync.Mutex
	checked   time.Time
	contents  [][]byte
	value     T
	loaded    bool
	lastError error
}

func newWatchedFile[T any](interval time.Duration, parse func([][]byte) (T, error), paths ...string) (*watchedFile[T], error) {
	w := &watchedFile[T]{paths: paths, interval: interval, parse: parse}
	if _, err := w.get(time.Now()); err != nil {
		return nil, err
	}
	return w, nil
}

// get returns the current value, reloading first if a file changed since the last check.
// err is the last reload's failure (the value is then the previous one).
func (w *watchedFile[T]) get(now time.Time) (T, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.loaded && now.Sub(w.checked) < w.interval {
		return w.value, nil
	}
	w.checked = now
	// The files are small (certificates, key sets): reading them once per interval is cheaper
	// and surer than trusting modification times, which some filesystems keep to the second.
	contents := make([][]byte, len(w.paths))
	same := w.loaded
	for i, p := range w.paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return w.fail(err)
		}
		contents[i] = b
		if w.loaded && !bytes.Equal(b, w.contents[i]) {
			same = false
		}
	}
	if same {
		return w.value, nil
	}
	v, err := w.parse(contents)
	if err != nil {
		// A certificate and its key are written one after the other: until both are there the
		// pair does not match. Keep the old pair and look again at the next check.
		return w.fail(err)
	}
	w.value, w.loaded, w.contents, w.lastError = v, true, contents, nil
	return v, nil
}

func (w *watchedFile[T]) fail(err error) (T, error) {
	w.lastError = err
	if !w.loaded {
		var zero T
		return zero, err
	}
	return w.value, err
}
