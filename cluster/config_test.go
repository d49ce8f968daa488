package cluster

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Config: "Stream is the JetStream stream of the process logs (DefaultStream), 1 to 64
// of [A-Za-z0-9_-]; Subject the prefix of the process subjects (DefaultSubject), dot-
// separated tokens of [A-Za-z0-9_-], at most 128 bytes ... Anything else is
// invalid_config": a wildcard, an empty token, a separator or a control character in
// either is refused before anything is connected or created.
func TestConnectRefusesAStreamOrSubjectItCannotUse(t *testing.T) {
	long := make([]byte, 129)
	for i := range long {
		long[i] = 'a'
	}
	bad := []Config{
		{Stream: "LIBOS.X"},
		{Stream: "LIB OS"},
		{Stream: "LIBOS*"},
		{Stream: "../LIBOS"},
		{Stream: "LIBOS\n"},
		{Stream: string(long[:65])},
		{Subject: "libos.>"},
		{Subject: "libos.*.proc"},
		{Subject: "libos..proc"},
		{Subject: ".libos"},
		{Subject: "libos."},
		{Subject: "libos proc"},
		{Subject: "libos.\x00"},
		{Subject: string(long)},
		{Host: "a b"},
	}
	for _, cfg := range bad {
		if cfg.Host == "" {
			cfg.Host = "a"
		}
		// Nothing listens on this port: a config that passed would fail differently.
		cfg.URL = "nats://127.0.0.1:1"
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n, err := Connect(ctx, cfg)
		cancel()
		if n != nil {
			n.Close()
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Stream %q, Subject %q, Host %q: %v, want invalid_config", cfg.Stream, cfg.Subject, cfg.Host, err)
		}
	}
}
