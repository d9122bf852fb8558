package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"sync/atomic"
)

// taskTokenMagic starts every signed task token; the version byte allows another format later.
var taskTokenMagic = []byte{'v', 't', 2}

const taskTokenHeaderLen = 3 + 4 + sha256.Size + 2

// ErrTaskTokenInvalid is every verification failure: a forger learns nothing from which check
// failed.
var ErrTaskTokenInvalid = errors.New("task token is not valid")

// SigningKey is one version of the cluster's task-token key.
type SigningKey struct {
	Version int32
	Secret  []byte
}

// TaskTokenSigner authenticates task tokens with an HMAC-SHA256 under the cluster key kept in
// the store: the newest key version signs, every stored version verifies, so tokens handed out
// before a rotation stay valid. A token is also bound to the principal that polled it (the
// worker's principal when auth is on, "" otherwise), so only that principal's workers can use
// it. A signed token is
//
//	"vt\x02" | key version (4) | HMAC(version, principal, token) (32) | len(principal) (2) | principal | token
type TaskTokenSigner struct {
	keys atomic.Pointer[[]SigningKey] // newest first
}

// NewTaskTokenSigner signs with keys[0]; keys must be newest first and not empty.
func NewTaskTokenSigner(keys []SigningKey) (*TaskTokenSigner, error) {
	s := &TaskTokenSigner{}
	if err := s.SetKeys(keys); err != nil {
		return nil, err
	}
	return s, nil
}

// SetKeys replaces the keys (newest first), after a rotation.
func (s *TaskTokenSigner) SetKeys(keys []SigningKey) error {
	if len(keys) == 0 {
		return errors.New("auth: no task-token signing key")
	}
	for _, k := range keys {
		if len(k.Secret) < 32 {
			return errors.New("auth: task-token signing key shorter than 32 bytes")
		}
	}
	keys = append([]SigningKey(nil), keys...)
	s.keys.Store(&keys)
	return nil
}

// SigningVersion is the key version that signs.
func (s *TaskTokenSigner) SigningVersion() int32 { return (*s.keys.Load())[0].Version }

// Sign returns the token a worker of principal gets. It is a function of its inputs and the
// key only, so a token signed twice (a redelivered cancel command) is the same bytes.
func (s *TaskTokenSigner) Sign(token []byte, principal string) []byte {
	k := (*s.keys.Load())[0]
	if len(principal) > 0xffff {
		principal = principal[:0xffff]
	}
	out := make([]byte, 0, taskTokenHeaderLen+len(principal)+len(token))
	out = append(out, taskTokenMagic...)
	out = binary.BigEndian.AppendUint32(out, uint32(k.Version))
	out = append(out, mac(k.Secret, k.Version, principal, token)...)
	out = binary.BigEndian.AppendUint16(out, uint16(len(principal)))
	out = append(out, principal...)
	return append(out, token...)
}

// Verify returns the token inside a signed one and the principal it was issued to, or
// ErrTaskTokenInvalid.
func (s *TaskTokenSigner) Verify(signed []byte) (token []byte, principal string, err error) {
	if len(signed) <= taskTokenHeaderLen || !bytes.HasPrefix(signed, taskTokenMagic) {
		return nil, "", ErrTaskTokenInvalid
	}
	version := int32(binary.BigEndian.Uint32(signed[3:7]))
	sum := signed[7 : 7+sha256.Size]
	plen := int(binary.BigEndian.Uint16(signed[7+sha256.Size : taskTokenHeaderLen]))
	if len(signed) <= taskTokenHeaderLen+plen {
		return nil, "", ErrTaskTokenInvalid
	}
	principal = string(signed[taskTokenHeaderLen : taskTokenHeaderLen+plen])
	token = signed[taskTokenHeaderLen+plen:]
	for _, k := range *s.keys.Load() {
		if k.Version == version && hmac.Equal(sum, mac(k.Secret, k.Version, principal, token)) {
			return token, principal, nil
		}
	}
	return nil, "", ErrTaskTokenInvalid
}

func mac(secret []byte, version int32, principal string, token []byte) []byte {
	h := hmac.New(sha256.New, secret)
	_, _ = h.Write([]byte("vigil task token"))
	_ = binary.Write(h, binary.BigEndian, version)
	_ = binary.Write(h, binary.BigEndian, uint16(len(principal)))
	_, _ = h.Write([]byte(principal))
	_, _ = h.Write(token)
	return h.Sum(nil)
}
