//go:build libos_seed

package seed

import (
	"embed"
	"io/fs"
)

//go:embed all:data
var data embed.FS

// embedded is the data directory that scripts/build-seeded.sh fills before building
// with the tag libos_seed.
var embedded, _ = fs.Sub(data, "data")
