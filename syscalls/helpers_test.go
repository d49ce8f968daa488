package syscalls

import "github.com/agentlibos/libos/internal/jsonexact"

func equalJSON(a, b []byte) (bool, error) { return jsonexact.EqualJSON(a, b) }
