package libos

// Crash stops s as the loss of its machine would (see crash).
func Crash(s *System) { s.crash() }
