// Package image reads what a process is made from: image manifests (format
// libos.image/v1, YAML or JSON, checked against an embedded JSON Schema, unknown
// fields refused) and the SKILL.md documents they ship.
//
// It owns the Image type and its vocabulary (projections, per-call limits, sandbox
// limits, approval policy, Skills), the embedded default manifest, and every check
// a manifest can get without a kernel: references between fields, capabilities and
// route names against the syscall route table, Skills and their allowed-tools. Every
// problem is listed at once, as the Details of an invalid_image or invalid_skill
// error.
//
// It is pure: it must not hold state, take the kernel's locks, touch the store or
// run code. Data comes from an fs.FS (a directory, or the Skills package tools
// embeds) and goes to engine.Kernel.SpawnImage, which adds the one check that needs
// a kernel (every tool is one of its built-ins) and keeps the Image whole in the
// process record.
package image
