// Package image is Proctor's daemon-less container image store: it turns a
// container image (a `docker save` archive, an OCI image layout directory, or
// an image in a registry) into one flattened root filesystem directory that a
// sandbox can use as its environment.
//
// # What it provides
//
//   - [Open] a store directory (typically CACHE/images). Its layout is
//
//     DIR/sha256/<manifest-hex>/rootfs     the flattened root filesystem
//     DIR/sha256/<manifest-hex>/meta.json  digest, config, size, dropped entries, build provenance
//     DIR/sha256/<manifest-hex>/manifest.json, config.json  as their digests cover them
//     DIR/refs.json                        normalised name → "sha256:<hex>"
//     DIR/tmp/<random>/                    unpacks in progress (removed by Open when abandoned)
//
//   - [Store.Import] of a docker-save archive (a file) or an OCI layout (a
//     directory), [Store.Pull] from a registry, [Store.Resolve] of a name or a
//     digest, [Store.List] and [Store.Remove].
//
//   - [Store.Add] of an image built on this machine (internal/imagebuild):
//     over a stored base whose layers are its first ones, the base's rootfs
//     is cloned (directories copied, everything else hard-linked: nothing
//     ever writes a stored rootfs in place) and only the new layers are
//     read and applied, under the same rules; [Store.Raw] gives a stored
//     image's manifest and config for building on it.
//
// The formats (manifests, configs, indexes, registry protocol) are read with
// github.com/google/go-containerregistry. Unpacking is this package's own code
// (unpack.go): each layer's uncompressed tar stream is applied in order into
// one directory, and every entry is created with *at system calls relative to
// a parent directory opened with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|
// RESOLVE_NO_MAGICLINKS), so nothing an image contains can make the host write
// outside the image's own rootfs.
//
// Decisions:
//
//   - Ownership (numeric uid/gid), permission bits including setuid, setgid and
//     sticky, and modification times are kept as the tar headers say.
//   - Extended attributes are dropped, security.capability included: file
//     capabilities from an image are not honoured (the sandbox runs with
//     no_new_privs anyway). Each dropped xattr is listed in [Image.Dropped].
//   - Character and block devices are never created (a sandbox gets its own
//     minimal /dev); they are listed in [Image.Dropped]. FIFOs are created.
//   - Whiteouts follow the OCI image spec: ".wh.NAME" removes NAME from the
//     lower layers' result; ".wh..wh..opq" removes every lower-layer entry of
//     its directory. Both apply to lower layers only: an entry the same layer
//     adds, before or after the marker, stays.
//   - Paths that are absolute, contain a ".." component or NUL, or are longer
//     than 4096 bytes are refused, as is any path whose parent goes through a
//     symlink and any hard link whose target is not an entry beneath the root.
//     The whole import then fails with an [*UnsafeEntryError]; the image is
//     not stored.
//   - Each layer's uncompressed stream is hashed and compared with the diff ID
//     in the image config (which the manifest digest covers); a mismatch is a
//     [*TamperedError].
//   - A total size cap (default 64 GiB) and an entry count cap (default
//     2,000,000) stop decompression bombs ([ErrLimit]).
//   - An image is unpacked into DIR/tmp and renamed into DIR/sha256 only when
//     complete, so a crash never leaves a half image that looks whole.
//   - The same manifest digest is unpacked once; importing it again only adds
//     its names.
//   - Unpacking needs root (it sets file owners).
//
// # What it must never do
//
//   - Follow a symlink or a hard link from the image while writing, or write,
//     link, chown, chmod or remove anything outside the store directory.
//   - Create device nodes or keep file capabilities from an image.
//   - Present a partially unpacked image as an image.
//   - Talk to a container daemon, or to any registry other than the one a
//     reference names.
//
// A [*Store] is safe for concurrent use by several goroutines; several
// processes may share one store directory (refs.json is guarded by a file
// lock, and each unpack in progress holds a lock on its temp directory).
package image
