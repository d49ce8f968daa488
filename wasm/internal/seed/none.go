//go:build !libos_seed

package seed

// packed is empty without the build tag libos_seed: no seed.
var packed string
