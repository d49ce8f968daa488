package syscalls

import "github.com/agentlibos/libos/syscalls/internal/jsonv"

func equalJSON(a, b []byte) (bool, error) { return jsonv.EqualJSON(a, b) }
