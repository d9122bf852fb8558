package sqlcommon

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPageToken(t *testing.T) {
	t.Parallel()
	const sqliteFormat, postgresFormat = 1, 'p'

	t.Run("RoundTrips", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ businessID, runID string }{
			{"worker-1", "run-1"},
			{"", ""},
			{"a/b\x00c", "ünïcode"},
			{"long-" + string(make([]byte, 300)), "r"},
		} {
			tok := EncodePageToken(sqliteFormat, tc.businessID, tc.runID)
			bid, rid, err := DecodePageToken(sqliteFormat, tok)
			require.NoError(t, err)
			require.Equal(t, tc.businessID, bid)
			require.Equal(t, tc.runID, rid)
		}
	})

	t.Run("OtherBackendsTokenIsRefused", func(t *testing.T) {
		t.Parallel()
		_, _, err := DecodePageToken(postgresFormat, EncodePageToken(sqliteFormat, "w", "r"))
		require.ErrorIs(t, err, ErrInvalidPageToken)
	})

	t.Run("MalformedTokenIsRefused", func(t *testing.T) {
		t.Parallel()
		tok := EncodePageToken(sqliteFormat, "worker", "run")
		for _, bad := range [][]byte{nil, {}, {sqliteFormat}, tok[:3], {sqliteFormat, 0xff}} {
			_, _, err := DecodePageToken(sqliteFormat, bad)
			require.ErrorIs(t, err, ErrInvalidPageToken, "token %q", bad)
		}
	})
}

func TestBoundToNanosClamps(t *testing.T) {
	t.Parallel()
	require.Equal(t, int64(math.MinInt64), BoundToNanos(time.Time{}))
	require.Equal(t, int64(math.MaxInt64), BoundToNanos(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)))
	_, err := TimeToNanos(time.Time{})
	require.ErrorContains(t, err, "outside the storable range")
}
