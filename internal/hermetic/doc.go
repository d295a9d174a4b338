// Package hermetic provides hermetic grading for verifiers that fetch
// their own tools (apt-get, curl | sh, pip, uv): a Recorder, the
// grader's proxy while the task's verifier is learned on the pristine
// environment, which fetches what an allow-list lets through and records
// every request and what answered it; and a Replayer, the grader's proxy
// while a trial is graded, which answers only from that Recording and
// never connects anywhere. So the verifier gets its tools, and nothing an
// agent wrote can reach the network while it runs.
//
// # How it is used
//
//	st, _ := hermetic.OpenStore(cacheDir + "/hermetic")
//	ca, _ := st.CA()                              // made once per store
//	tr, _ := ca.Trust(pristineSystemBundle)       // bind tr.Bundle over tr.Paths, add tr.Env
//	// learning: the verifier on the pristine environment plus the oracle's changes
//	rec, _ := hermetic.NewRecorder(st, hermetic.RecordOptions{Allow: allow, Record: onDecision})
//	go rec.Serve(listenerInsideTheSandbox)        // HTTP_PROXY and HTTPS_PROXY point at it
//	... run the verifier ...
//	rec.Close()
//	r, _ := rec.Recording()
//	st.Save(key, r)                               // key: the environment's and tests' digests
//	// grading: every trial
//	r, _ = st.Load(key)
//	rp, _ := hermetic.NewReplayer(r, ca, hermetic.ReplayOptions{Record: onDecision})
//	go rp.Serve(listenerInsideTheSandbox)
//	... run the verifier on the agent's changes ...
//	rp.Close()                                    // rp.Violations(), rp.Err()
//
// Both serve an HTTP proxy: CONNECT for https (the tunnel's TLS is ended
// with a certificate the store's CA signs for the host asked for, whose
// TLS server name must be that host, and the HTTP/1.1 requests inside are
// read one by one) and plain http:// requests in absolute form (apt over
// http). Every request is matched on its method, its absolute URL (the
// host as netpolicy.ParseHost writes it, the port only when not the
// scheme's default, the path and query as sent), its Accept header, and
// the SHA-256 of its body.
//
// # Headers, and why the same client replays the same way
//
// Other request headers are not part of the match, and the recorder
// sends upstream neither Range, If-Range nor any If-* condition, nor the
// client's Accept-Encoding (it asks for identity): a recording holds whole
// representations, which are always a valid answer to a ranged or
// conditional request, and which any client can read. What the client
// already holds (a partial download, apt's lists) then changes nothing.
// A server that encodes anyway is recorded as it answered, its
// Content-Encoding kept. Accept stays in the key because it chooses the
// representation (PyPI's JSON or HTML index). Responses keep only the
// headers clients act on (Content-Type, Content-Encoding,
// Content-Disposition, Content-Language, Location, ETag, Last-Modified,
// Cache-Control, Expires, Link, Retry-After, WWW-Authenticate, and
// Content-Length for a HEAD); a replay sends those, the body with its
// length, and nothing else: no Date, no sniffed type. Redirects are
// recorded and replayed as they came, never followed.
//
// While recording, a request asked again gets the answer recorded first
// (the same bytes a replay gives), unless that answer was a refusal or a
// 5xx, in which case it is fetched again and the newer answer kept. A
// replay gives each recorded answer any number of times, in any order.
//
// # What is recorded, and what a violation is
//
// The recording holds, besides responses, the refusals the recorder made
// (not on the allow-list, a refused address, a failed dial, a body over
// the limit): the replay refuses the same request with the same words,
// and that is no violation, since the pristine verifier met it too.
// Replaying, a request or tunnel the recording does not hold, a request
// the proxy cannot read, a tunnel whose TLS server name is not its host
// or whose TLS handshake fails, and a request inside a tunnel whose Host
// names another host, are refused and reported with Decision.Violation
// set.
//
// The recording is content-addressed: an index in canonical JSON (RFC
// 8785) whose SHA-256 is its digest, and bodies stored by their SHA-256
// (BlobFile), shared in a Store, copied beside the index by Export for a
// bundle, and checked, every byte, when loaded (Load, LoadDir,
// Store.Load) and again as they are served.
//
// # The CA
//
// One per Store, made on first use: an ECDSA P-256 key and a certificate
// that signs only end-entity certificates, in ca/ca.pem under the store's
// directory (mode 0600 in a 0700 directory; refused, ErrCAKeyExposed, if
// others may read it or it is not the user's own). Trust gives the
// certificate, appended to the environment's own bundle, for the grader
// sandbox to trust, and the variables that point its tools at it.
//
// # What it must never do
//
// The Replayer must never dial, resolve or send anything anywhere, and
// never answer a request with anything but its recorded answer or a
// refusal; it must never serve a body that does not hash to its digest
// (the last chunk is held back until the whole has been checked, and the
// connection cut). The Recorder must never dial an address netpolicy's
// AddrPolicy refuses (metadata, link-local and the like always; loopback,
// private and the host's own addresses to a wildcard rule; a HostMap
// address is the operator's word, checked as for an exact rule), never
// resolve a name it maps, never follow a redirect, and never record an
// answer it did not give the client. Neither may let the CA's private key
// out of the process: it is in no error, Decision, Trust, Recording or
// file but ca/ca.pem; nor panic on what a client sends; nor lose a
// Decision: Record is called once for every request the proxy reads and
// every tunnel, and Close returns after every call has returned.
//
// # Limits
//
// A request the proxy cannot parse at all (not HTTP/1.x) is answered 400
// by net/http and not reported. Only HTTP/1.1 is spoken inside tunnels
// (ALPN http/1.1); a tunnel for another protocol (SSH, a git:// fetch)
// fails its TLS handshake. A client that trusts only its own roots (Java's
// keystore, a pinned certificate) fails, in learning as in grading. A URL
// that changes from run to run (a timestamp in the query, a signed URL
// the verifier makes itself) is not in the recording. Signed metadata
// with an expiry (apt's Valid-Until) is replayed as recorded, and may
// expire.
package hermetic
