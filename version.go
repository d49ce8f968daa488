package libos

import (
	"runtime"
	"runtime/debug"

	"github.com/agentlibos/libos/wasm"
)

// ModulePath is this module's import path.
const ModulePath = "github.com/agentlibos/libos"

// VersionInfo names a build of the libOS: the module version, the toolchain and the
// platform, the wazero version, and the sandbox guest it embeds.
type VersionInfo struct {
	// Module is this module's version as the Go toolchain recorded it: the tag or
	// pseudo-version of a `go install …@version` or of a dependency, the VCS-derived
	// version of a build in a checkout, "(devel)" when none is known.
	Module string `json:"module"`
	// Revision is the VCS revision of a build in a checkout ("" otherwise), with
	// "+dirty" when the checkout had local changes.
	Revision string `json:"revision,omitempty"`
	// Go is the Go release that built the program; Platform is GOOS/GOARCH.
	Go       string `json:"go"`
	Platform string `json:"platform"`
	// Wazero is the version of the WebAssembly runtime, from the build information.
	Wazero string `json:"wazero"`
	// Guest is the embedded sandbox guest: its sha256, QuickJS release and build.
	Guest wasm.GuestInfo `json:"guest"`
}

// Version describes this build. The versions come from the build information
// (debug.ReadBuildInfo), so they cannot drift from go.mod or the tag that was installed.
func Version() VersionInfo {
	v := VersionInfo{
		Module:   "(devel)",
		Wazero:   "unknown",
		Go:       runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Guest:    wasm.Guest(),
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	version := func(m *debug.Module) string {
		if m.Replace != nil && m.Replace.Version != "" {
			return m.Replace.Version
		}
		return m.Version
	}
	if bi.Main.Path == ModulePath && bi.Main.Version != "" {
		v.Module = bi.Main.Version
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if v.Revision != "" && dirty {
		v.Revision += "+dirty"
	}
	for _, d := range bi.Deps {
		switch d.Path {
		case ModulePath:
			if mv := version(d); mv != "" {
				v.Module = mv
			}
		case "github.com/tetratelabs/wazero":
			v.Wazero = version(d)
		}
	}
	return v
}
