//go:build libos_seed

package seed

import _ "embed"

// packed is the seed that scripts/build-seeded.sh writes to data/seed.pack before
// building with the tag libos_seed.
//
//go:embed data/seed.pack
var packed string
