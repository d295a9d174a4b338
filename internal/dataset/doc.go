// Package dataset provides datasets of tasks by name: it reads Harbor's
// dataset registry (a registry.json, by URL or file), fetches each task's
// git repository at the commit the registry names with the ordinary git
// client, and keeps the tasks in a read-only cache, pinned by commit and by
// each task's digest, so that `proctor dataset pull NAME@VERSION` and
// `proctor bench --dataset NAME@VERSION` name the same tasks, offline once
// pulled.
//
// The registry's format is Harbor's (laude-institute/harbor, its
// registry models DatasetSpec and RegistryTaskId in harbor.models): a JSON
// array of datasets, each
//
//	{"name": "terminal-bench", "version": "2.0", "description": "…",
//	 "tasks": [{"name": "adaptive-rejection-sampler",
//	            "git_url": "https://github.com/laude-institute/terminal-bench-2.git",
//	            "git_commit_id": "69671fbaac6d67a7ef0dfec016cc38a64ef7a77c",
//	            "path": "adaptive-rejection-sampler"}],
//	 "metrics": [{"type": "mean", "kwargs": {}}]}
//
// with one entry per name and version. See docs/dataset.md for what is
// accepted and refused.
//
// The cache, under the caller's cache directory:
//
//	datasets/git/<sha256 of the URL>/               a bare repository per git URL: the fetched commits
//	datasets/sets/<name>@<version>/dataset.json     the lock: where each task came from and its digest
//	datasets/sets/<name>@<version>/tasks/<task>/    each task's files, read-only
//
// What the package must never do:
//
//   - run anything but git, and git only to fetch into and read from its
//     own bare repositories: never a checkout, a hook, a filter or a
//     remote helper (only the file, git, http, https and ssh transports);
//   - write outside its cache directory, follow a path out of a task (a
//     registry path with "..", a symlink in a task whose target leaves it,
//     also through other links), or keep a task whose size or file count is
//     over its caps;
//   - use a cached task whose digest no longer matches its lock: that is a
//     *TamperError, never a silent re-fetch;
//   - touch the network for a dataset already cached.
package dataset
