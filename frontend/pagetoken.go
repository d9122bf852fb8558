package frontend

import (
	"encoding/json"
	"hash/fnv"

	"go.temporal.io/api/serviceerror"
)

// pageToken is the frontend's opaque continuation token. It wraps history's token (or, for
// ListHosts, the last host name returned) and a fingerprint of the request it continues, so a
// token replayed with another namespace, query or filter is rejected instead of silently
// skipping or repeating workers.
type pageToken struct {
	Version     int    `json:"v"`
	Fingerprint uint64 `json:"f"`
	History     []byte `json:"h,omitempty"`
	After       string `json:"a,omitempty"`
}

const pageTokenVersion = 1

func fingerprint(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		_, _ = h.Write([]byte(p))
		_, _ = h.Write([]byte{0})
	}
	return h.Sum64()
}

func encodePageToken(t pageToken) []byte {
	t.Version = pageTokenVersion
	b, err := json.Marshal(t)
	if err != nil {
		// Marshalling this struct cannot fail.
		panic(err)
	}
	return b
}

// decodePageToken reads a token; an empty one starts from the beginning.
func decodePageToken(raw []byte, fp uint64) (pageToken, error) {
	var t pageToken
	if len(raw) == 0 {
		return t, nil
	}
	if err := json.Unmarshal(raw, &t); err != nil || t.Version != pageTokenVersion {
		return t, serviceerror.NewInvalidArgument("next_page_token is malformed")
	}
	if t.Fingerprint != fp {
		return t, serviceerror.NewInvalidArgument("next_page_token belongs to a different request (namespace, query or filter changed)")
	}
	return t, nil
}
