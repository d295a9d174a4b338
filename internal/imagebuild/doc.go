// Package imagebuild builds container images from Dockerfiles without a
// daemon, into Proctor's image store (internal/image): the environments of
// tasks that ship an environment/Dockerfile instead of a prebuilt image.
//
// # What it provides
//
// [Build] parses the Dockerfile with BuildKit's own parser and instruction
// packages ([Parse]), then builds the target stage (and only the stages it
// needs) step by step:
//
//   - FROM an image (a tag or an @sha256: pin) is resolved in the store or
//     pulled through it (image.Store.Pull); FROM scratch; FROM an earlier
//     stage. A base image's ONBUILD triggers are refused.
//   - RUN (shell form, exec form, SHELL, here-documents) runs in Proctor's
//     sandbox (internal/sandbox) over an overlay: the stage's layers and the
//     base's unpacked rootfs as read-only lowers, a fresh upper per step on
//     disk in the build cache, /tmp part of the layer, as USER's ids. The
//     upper becomes the step's layer: owners shifted back from the
//     sandbox's host ids, set-id bits kept, overlay whiteouts (0:0
//     character devices) written as OCI ".wh.NAME" entries and opaque
//     directories (trusted.overlay.opaque=y) as ".wh..wh..opq".
//   - COPY and ADD (--chown by number or name, --chmod octal, --from a
//     stage or an image, --exclude, --link, here-documents) write into a
//     detached overlay mount made by the host (never attached to any mount
//     table) whose upper becomes the layer. Sources from the context are
//     read through an index of the context made once per build with
//     .dockerignore applied (Dockerfile.dockerignore first); the
//     destination is resolved with the image as "/" (RESOLVE_IN_ROOT).
//     ADD of an http(s) URL goes through the build's egress proxy.
//   - ENV, ARG (and --build-arg, and the global platform arguments),
//     WORKDIR (made as USER when missing), USER, LABEL; ENTRYPOINT, CMD,
//     EXPOSE, HEALTHCHECK, VOLUME, STOPSIGNAL, ONBUILD and MAINTAINER are
//     recorded in the image config.
//
// Network: with no allow-list a RUN step has an empty network namespace
// and ADD of a URL is refused. With one (Options.AllowHosts), the only
// way out is a netpolicy egress proxy listening at 127.0.0.1:3128 inside
// each RUN step (HTTP_PROXY and friends point there) and, for ADD, reached
// over an in-process socket pair; every decision is a line of the build
// log.
//
// Cache: each step's key hashes its parent's key, the instruction as it
// runs (after ARG and ENV expansion, with the environment, USER, WORKDIR
// and SHELL it runs with) and, for COPY and ADD, the digest of what it
// copies (paths, types, modes, sizes, content; not owners or times). A
// second build of an unchanged context runs nothing; an edit rebuilds
// from the first step that sees it. The image's config carries no build
// time, so the same steps give the same manifest digest, which is the
// environment digest of the trials on it. The image's metadata in the
// store (image.BuildInfo) records the Dockerfile's path and digest and
// the build context's digest.
//
// Errors that concern the Dockerfile are [*LineError]s naming the file
// and line ("environment/Dockerfile:7: RUN exited 100: E: Unable to
// locate package x (log: …)"); a failed step's whole output is in the
// build log.
//
// # What it must never do
//
//   - Follow a symlink out of the build context, or read a context path
//     that climbs out of it ("../x"): source paths are resolved in the
//     context's own index, an absolute or escaping symlink is refused
//     ([ErrEscape]), and every read is an openat2 with
//     RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS of the
//     resolved path, its content checked against the index.
//   - Follow anything from an upper directory or a source tree while
//     turning it into a layer or copying it: every walk is by directory
//     descriptor, with O_NOFOLLOW and lstat.
//   - Give a RUN step any network but the proxy, or the proxy any host
//     the allow-list does not name.
//   - Ignore an instruction, flag or form it does not build: RUN --mount,
//     --network, --security and --device, COPY --parents, ADD of git
//     sources, of a local archive (which ADD would unpack), ADD
//     --keep-git-dir and --unpack=true, a symbolic --chmod, FROM
//     --platform for another platform, a here-document run by its own
//     interpreter (#!), a base image's ONBUILD triggers: each is an
//     [ErrUnsupported] naming the line.
//   - Write the image store other than through image.Store.Add, whose
//     unpacking rules apply to every new layer.
//
// A build is used by one goroutine. Several builds, in one process or in
// several, may share a cache directory: steps are built in a directory of
// their own and renamed into the cache whole.
package imagebuild
