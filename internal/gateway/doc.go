// Package gateway serves, inside a sandbox, a plain-HTTP stand-in for a model
// provider's API that forwards each request to the real provider with the
// real API key, which only the host holds.
//
// For each configured provider (a Spec, e.g. openai=https://api.openai.com/v1)
// the sandbox gets NAME_BASE_URL pointing at a Gateway serving on a loopback
// listener inside it, and NAME_API_KEY set to DummyKey. A Gateway relays each
// request to the upstream over HTTPS (or plain HTTP, for local model servers),
// drops every credential the agent sent, adds the real key, relays the answer
// as it arrives (server-sent events included) and reports one Call per
// request: digests, byte counts, status, latency and the token usage the
// provider reported. Usage sums those per model.
//
// Everything that reaches a Gateway was written by the adversary: request
// line, headers, body, the way it closes its connection. So this package must
// never:
//
//   - send a request anywhere but the upstream's scheme and host, whatever
//     Host header, absolute-form target, CONNECT, path trick ("//host",
//     dot segments, encoded slashes) the agent tries: only origin-form targets
//     under the upstream's path are relayed, on a URL built from the upstream;
//   - follow a redirect: a 3xx is relayed to the agent as it came;
//   - let the real key reach the agent: it is removed from every response
//     header and, by a streaming replacer, from every response body, error
//     bodies included; an encoding it cannot decode (and so cannot scrub) is
//     refused. The key is matched literally: an upstream that sent it back
//     transformed (base64, escaped, cut in parts) would defeat the scrubber,
//     which is why the key must be printable ASCII that JSON encoders leave
//     as it is;
//   - pass on a credential the agent sent (Authorization, X-Api-Key, Api-Key,
//     X-Goog-Api-Key, Proxy-Authorization, Cookie, a "key" query parameter),
//     or print the key in an error;
//   - buffer without bound: request bodies are capped (413), and all of them
//     together; usage is parsed from at most a few MiB of each response;
//   - report a call twice or not at all, or call Record after Close returned.
//
// It knows nothing of sandboxes or trials: the caller makes the listener,
// reads the key from the host (KeyFromEnv) and writes the calls down.
//
// # Forwarding rules
//
// Path: the agent's BASE_URL already holds the upstream's path (BaseURL), so a
// request path is put as-is onto the upstream's scheme and host; it must lie
// under the upstream's path (404 otherwise) and hold no "." or ".." segment,
// backslash or NUL, nor start with "//" (400). The query is kept, minus any
// parameter named key, api_key, api-key or apikey; a query with ';' is refused.
//
// Key: the real key goes in exactly one header. X-Api-Key when the agent sent
// X-Api-Key or the gateway is named "anthropic"; else Api-Key when the agent
// sent Api-Key (Azure); else X-Goog-Api-Key when the agent sent that (Gemini);
// else Authorization: Bearer.
//
// Encoding: the upstream is asked for Accept-Encoding: identity, so the bytes
// can be scrubbed and parsed. If it sends gzip or deflate anyway the gateway
// decodes it and relays the plain body; any other encoding is answered 502.
//
// Headers: hop-by-hop headers (and those Connection names), Expect and
// credential headers are not forwarded; Set-Cookie, Content-Length and
// trailers are not relayed back. Upgrades (WebSocket) are not supported.
//
// Refusals: CONNECT, absolute-form and malformed targets get 400, other
// methods than GET, HEAD, POST, PUT, PATCH, DELETE and OPTIONS 405, paths
// outside the upstream's 404, a body over 32 MiB 413, bodies held together
// over 256 MiB 503; failures to reach or read the upstream 502. Each is a JSON
// error both the OpenAI and Anthropic SDKs show, and a recorded Call.
//
// Limits: headers must arrive within 10s and the whole request within 2
// minutes; at most 512 connections are served at once (more wait to be
// accepted). Responses have no time limit: the upstream's (or the caller's
// Transport's) apply.
package gateway
