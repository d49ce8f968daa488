package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
)

// secretBytes is the size of a store secret: 256 bits, a full HMAC-SHA-256 key.
const secretBytes = 32

func secretKey(name string) []byte { return key(tMeta, "secret", name) }

// Secret is the store's secret named name, created (random, 256 bits) and kept on
// first use. It lives under the meta table, outside every process's records: no
// process reads it through a route, and no event, export or result carries it. A
// server uses it to authenticate what it hands a client to bring back (an MCP
// requestState), so that a restart of the server still recognises it.
func (s *Store) Secret(ctx context.Context, name string) ([]byte, error) {
	if name == "" {
		return nil, errorf(CodeInvalid, nil, "a secret needs a name")
	}
	var out []byte
	err := s.Update(ctx, func(tx *Tx) error {
		v, err := tx.get(secretKey(name), "secret "+name)
		if err == nil {
			if len(v) != secretBytes {
				return errorf(CodeCorrupt, nil, "secret %s is %d bytes, not %d", name, len(v), secretBytes)
			}
			out = v
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		v = make([]byte, secretBytes)
		if _, err := rand.Read(v); err != nil {
			return fmt.Errorf("store: secret %s: %w", name, err)
		}
		out = v
		return tx.set(secretKey(name), v)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
