// Package bundle writes and verifies the signed document that ends every
// trial: bundle.json, which a stranger can check with only the document and
// an ed25519 public key. It provides RFC 8785 canonical JSON (JCS), the
// hash-chained timeline, the artifact manifest, ed25519 signing and
// verification, and the key files. docs/bundle.md is the full description.
//
// # The format
//
// bundle.json is the JCS form of
//
//	{"payload": P, "signature": S}
//
// with no trailing newline, where S is the padded standard base64 of the
// ed25519 signature of the bytes
//
//	"proctor-bundle-v1" 0x00 JCS(P)
//
// (SignatureContext followed by the canonical payload). Because the
// signature is over the canonical form, a copy whose keys were re-ordered
// or whose whitespace or string escapes changed still verifies; any changed
// value does not. P has exactly these fields, all required, no others:
//
//	schema      "proctor.bundle/v1"
//	verdict     the trial's verdict: a JSON object, opaque here
//	timeline    [{seq, time, kind, detail, prev, hash}, ...]
//	manifest    [{name, sha256, size}, ...], sorted by name
//	provenance  {task_digest, environment_digest,
//	             agent {command, dir_digest, env_names},
//	             proctor {version, revision, go},
//	             host {kernel, platform, isolation}}
//	signer      {algorithm "ed25519", public_key, fingerprint}
//
// Timeline event i has seq i; time is RFC 3339 UTC with nine fractional
// digits (TimeLayout); detail is an object; hash is the lowercase hex
// SHA-256 of the JCS form of the event without hash; prev is the hash of
// event i-1, or Genesis (64 zeros) for event 0. Artifact names are plain
// file names (CheckArtifactName); sha256 is 64 lowercase hex; size is an
// integer up to 2^53-1. Digests are "sha256:" + 64 lowercase hex (the
// environment may also be "host-sha256:" + 64 hex; the agent's dir_digest
// may be ""). env_names and isolation are sorted lists without repeats.
// The signer is inside the payload, so it is signed too; its fingerprint is
// "SHA256:" + unpadded standard base64 of SHA-256 of the 32 key bytes.
//
// # Verification
//
// Verify parses strictly (valid UTF-8, one JSON value, no duplicate keys,
// every field present, typed and well formed, no unknown field), then
// checks the signer against WithPublicKey, the signature, the hash chain
// and, with WithArtifactDir, the artifacts. The first failure is a
// *VerifyError naming the field; tampering matches ErrTampered.
//
// # What the package must never do
//
//   - know of trials, tasks or Linux: the verdict is opaque and nothing
//     here calls the operating system beyond reading files, so a verifier
//     builds for any platform;
//   - sign a payload that Verify would reject (Sign checks it first);
//   - accept a bundle by leniency: no duplicate keys, no unknown fields, no
//     missing fields, no second spelling of a time or a base64 value;
//   - panic, whatever the input to Verify;
//   - follow a symbolic link or leave the artifact directory when checking
//     or hashing artifacts;
//   - put a private key, or any part of one, into an error message, and
//     read a private key file that its group or others can open;
//   - record the values of the agent's environment: only their names.
package bundle
