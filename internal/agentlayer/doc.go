// Package agentlayer provides installed agents: the npm package a recipe
// names, installed once per recipe digest into a read-only directory (a
// layer) that the agent's sandbox mounts at recipe.LayerPath.
//
// Install runs the host's npm in a sandbox whose root is the host's system
// directories (read-only), whose only writable places are the new layer and
// npm's cache for this install, and whose only network is the package
// registry, through an allow-list egress proxy that records every
// connection. npm runs with --ignore-scripts: no code of the packages runs
// while they are installed, and npm checks each tarball against the
// registry's integrity hash. The recipe's pinned integrity (when it pins
// one) must then be the one npm resolved, or the install is refused and
// nothing is kept. The layer's manifest records every package installed
// (name, version, integrity) and the digest of the whole tree, which goes
// into each trial's provenance.
//
// The cache, under the caller's cache directory:
//
//	agents/<hex of the recipe digest>/layer.json   the manifest
//	agents/<hex of the recipe digest>/layer/       the installed tree, read-only
//
// A layer appears there only complete: it is built in a temporary directory
// beside it and renamed into place, under a lock that one install per
// recipe holds.
//
// What the package must never do:
//
//   - run an installed package's code while installing it, or let the
//     install reach anything but the registry;
//   - keep a layer whose packages differ from the recipe's pinned
//     integrity, or a half-installed one;
//   - hand out a layer whose manifest does not name the recipe asked for,
//     does not carry that recipe, or whose tree is not the one its
//     manifest's digest names (the cache is anyone's who can write it).
package agentlayer
