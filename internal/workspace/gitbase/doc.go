// Package gitbase prepares the repository an agent starts from: a fresh git
// repository checked out at a task's base commit, whose history holds that
// commit and its ancestors and nothing else. It defeats the cheat of mining
// the source repository's later commits, branches, tags, stashes, reflogs,
// dangling objects or remotes for the fix: in the copy they do not exist, not
// even as unreachable objects in a pack.
//
// A copy holds, besides the working tree (the tree of base, as a checkout
// with no configuration writes it): HEAD on refs/heads/main, one pack with
// exactly the objects reachable from base, an index that makes git status
// clean, the config git init writes, and, when the source is a shallow
// clone, the shallow file. A submodule of base gets, at its path, a copy of
// its own repository made the same way at the commit base records. Copies
// are cached by commit and shared read-only.
//
// Whatever shape the source has (partial clones with promisor packs,
// shallow, shared or referenced clones, cruft and kept packs, bitmaps, a
// multi-pack-index, commit-graphs, packed refs, linked worktrees), every
// copy is checked before it is published (verify.go): every object it
// holds, in every pack and loose, against the set git finds reachable from
// base in the copy alone, and every file of its .git against what a copy
// is made of. Anything more is a *LeakError and the build is discarded. A
// source lacking objects of base's history is refused (*MissingError);
// nothing is ever fetched.
//
// What the package must never do:
//
//   - run anything named by the source repository: no hook, no fsmonitor, no
//     filter, no alias, no pager, no transport. No git command runs in src;
//     git only reads src's objects, lent to the new repository through
//     GIT_ALTERNATE_OBJECT_DIRECTORIES, and refs are read by this package from
//     their files. Of src's config only extensions.objectFormat and
//     extensions.refStorage are read, as data;
//   - let the caller's git configuration in: every git command runs with an
//     environment built from scratch (no system or global config, a private
//     empty HOME) and with hooks, fsmonitor, reflogs, automatic gc and all
//     transports turned off on its command line;
//   - touch src's working tree or index, or write anything into src;
//   - hand out a half-built copy: copies are built in a temporary directory,
//     checked, completed by a marker written last, and renamed into place;
//   - fetch: a missing object is an error, never a lazy fetch from a
//     promisor remote.
package gitbase
