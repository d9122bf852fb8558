package sqlcommon

import (
	"time"

	"github.com/vigilhq/vigil/persistence"
)

// OptionalTime stores a time that may be unset (a key not revoked) as unix nanoseconds, the
// zero time as 0, so "not revoked" is a plain integer comparison.
func OptionalTime(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// FromOptionalTime reads what OptionalTime stored.
func FromOptionalTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// ScanAPIKey reads one API key row (id, hash, namespace, roles, description, create time,
// revoke time) through scan, a row's Scan.
func ScanAPIKey(scan func(dest ...any) error) (*persistence.APIKeyRecord, error) {
	k := &persistence.APIKeyRecord{}
	var created, revoked int64
	if err := scan(&k.ID, &k.Hash, &k.Namespace, &k.Roles, &k.Description, &created, &revoked); err != nil {
		return nil, err
	}
	k.CreateTime = FromOptionalTime(created)
	k.RevokeTime = FromOptionalTime(revoked)
	return k, nil
}
