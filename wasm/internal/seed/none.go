//go:build !libos_seed

package seed

import "io/fs"

// embedded is nil without the build tag libos_seed: no seed.
var embedded fs.FS
