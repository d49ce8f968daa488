package syscalls

import "github.com/agentlibos/libos/internal/jsonv"

func equalJSON(a, b []byte) (bool, error) { return jsonv.EqualJSON(a, b) }
