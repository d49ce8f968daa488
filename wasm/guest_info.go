package wasm

// GuestInfo says which guest this package embeds and how it was built. The values come
// from guest_version.go, which wasm/guest/build.sh writes together with
// libos_guest.wasm; a test checks that SHA256 is the digest of the embedded bytes, and
// 'make guest-verify' that the build scripts reproduce both files exactly.
type GuestInfo struct {
	// SHA256 is the hex sha256 of the embedded libos_guest.wasm.
	SHA256 string `json:"sha256"`
	// Size is the length of the embedded libos_guest.wasm in bytes.
	Size int64 `json:"size"`
	// QuickJSRelease is the QuickJS release compiled into the guest (its VERSION file).
	QuickJSRelease string `json:"quickjs_release"`
	// QuickJSSource is where the QuickJS sources come from and the digest they are
	// checked against (scripts/fetch-quickjs.sh).
	QuickJSSource string `json:"quickjs_source"`
	// Clang and WASILibc are the compiler and C library versions of the build.
	Clang    string `json:"clang"`
	WASILibc string `json:"wasi_libc"`
	// PatchSHA256 is the hex sha256 of wasm/guest/quickjs.patch.
	PatchSHA256 string `json:"patch_sha256"`
	// SourcesSHA256 is a digest of every guest input in the repository (build script,
	// shim, prelude, console formatter, patch, source pin).
	SourcesSHA256 string `json:"sources_sha256"`
}

// Guest describes the embedded guest.
func Guest() GuestInfo { return builtGuest }
