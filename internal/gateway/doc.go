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
//   - let the key be used for more than the model: only the endpoints,
//     tools and content under "What the agent may ask" are relayed, so the
//     agent can neither reach the internet through the provider nor read
//     what other trials stored under the same key;
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
//   - report a call twice or not at all, or call Record after Close returned;
//   - put the key on a Tape, drop a call from one silently, or, replaying,
//     send anything anywhere.
//
// It knows nothing of sandboxes or trials: the caller makes the listener,
// reads the key from the host (KeyFromEnv) and writes the calls down. A
// caller that searches what the agent sends (Options.Inspect) is given
// each request body once read, and the response as the agent got it,
// without the gateway keeping either.
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
// Headers: hop-by-hop headers (and those Connection names), Expect,
// credential headers and every OpenAI-* header but OpenAI-Beta (names
// compared ignoring case, '_' as '-') are not forwarded: OpenAI-Organization
// and OpenAI-Project would move the key to another organisation or project.
// Set-Cookie, Content-Length and trailers are not relayed back.
//
// Upgrades: the gateway speaks HTTP/1.1 only, and never relays an upgrade.
// A request whose Upgrade header names websocket (in any case, among other
// protocols or on several lines, with or without Connection: Upgrade) is
// answered 426 Upgrade Required, with no Upgrade header, whatever its method
// and target, before any other check: it is the answer on which Codex (the
// Responses WebSocket transport, tried first by its built-in openai provider
// and by a provider with supports_websockets) falls back to HTTPS POST at
// once, for the rest of the session. To any other answer, a 403 or 404
// included, it tries again with backoff (Codex 0.169.0 made seven
// handshakes, over 6.5 seconds, before its first POST) before it falls
// back (codex-rs, core/src/client.rs,
// ModelClientSession's stream_responses_websocket: UPGRADE_REQUIRED becomes
// WebsocketStreamOutcome::FallbackToHttp). Any other Upgrade (h2c) is
// ignored, as HTTP lets a server do: the header is dropped with the other
// hop-by-hop ones and the request served as plain HTTP/1.1. An upstream
// that answers 101 Switching Protocols is refused (502).
//
// Refusals: a WebSocket upgrade gets 426 (above); CONNECT, absolute-form
// and malformed targets get 400, other methods than GET, HEAD, POST, PUT,
// PATCH, DELETE and OPTIONS 405, paths outside the upstream's 404,
// endpoints, fields, tools and content not offered 403, a POST body that
// is not one JSON object in UTF-8, or is nested more than 128 levels deep,
// 400 (one with a Content-Encoding 415), a body over 32 MiB 413, bodies
// held together over 256 MiB 503; failures to reach or read the upstream
// 502. Each is a JSON error, with a
// one-line message both the OpenAI and Anthropic SDKs show, and a recorded
// Call (with Error set); none is forwarded. With a Tape, a request is
// refused 503 once the recording has failed, and, replaying, 409 once the
// replay has diverged (see "Recording and replay").
//
// Limits: headers must arrive within 10s and the whole request within 2
// minutes; at most 512 connections are served at once (more wait to be
// accepted). Responses have no time limit: the upstream's (or the caller's
// Transport's) apply.
//
// # Recording and replay
//
// A Tape records the calls of a trial, for a later run to replay them
// without the provider. NewTape makes one; each Gateway of the trial is
// given it as Options.Tape. Every request a Gateway serves, relayed or
// refused by its own checks (not one refused for coming after Close), gets
// the Tape's next seq once its body has been read, or when it is refused
// before that: calls are numbered from 1, over all the Gateways of the Tape,
// in the order their bodies were read. A call holds the gateway's name, the
// method, the target (the path as forwarded, escaped, and the query as
// forwarded, credential parameters dropped; Call.Path for a request refused
// before its target passed), the digest and size of the request body (none
// if refused before it was read), and what the agent was sent: status,
// Content-Type (no other header), the body as the agent got it (decoded and
// scrubbed: no key is ever on a Tape), and whether the gateway cut the
// response because the upstream's broke off.
//
// WriteTo writes recording.jsonl, the same bytes for the same calls: a
// header line, a line per call in seq order, then a line per distinct body
// (bodies are stored once, by SHA-256) sorted by digest:
//
//	{"schema":"proctor.recording/v1","calls":2,"blobs":3}
//	{"seq":1,"gateway":"openai","method":"POST","target":"/v1/chat/completions","request_sha256":"9555…","request_bytes":72,"status":200,"content_type":"application/json","response_sha256":"5170…","response_bytes":448}
//	{"seq":2,"gateway":"openai","method":"GET","target":"/v1/files","request_sha256":"","request_bytes":0,"status":403,"content_type":"application/json","response_sha256":"2310…","response_bytes":138}
//	{"sha256":"2310…","base64":"eyJl…"}
//	… and the lines of 5170… and 9555…
//
// Each line is encoding/json of fixed fields in that order, without spaces
// or HTML escapes, and a newline; digests are lower-case hex, base64 is
// standard and padded, request_sha256 is "" for a body not read, cut is
// written only when true. Strings are kept as valid UTF-8 (an invalid byte
// becomes U+FFFD, recording and replaying alike), so they survive JSON.
//
// ReadTape reads such a file as hostile input, and accepts it only in
// exactly that form: within a size limit, each line strict (no unknown or
// repeated field), seq contiguous from 1, the header's counts right, every
// body a call names present once, hashing to its digest (else
// ErrTapeTampered), and no other; else a *TapeError names the line and
// field. The digests make a file consistent, not authentic: keep
// recordings where the agent cannot write.
//
// Replay: each Gateway is given the Tape from ReadTape as Options.Replay,
// and then needs no key and uses no network. A request goes through the
// same checks as a live one; once its body has been read (or when it is
// refused before that) it is matched against the next call of the Tape,
// one cursor for all its Gateways: gateway, method, target and request
// digest must be those recorded. Headers are not compared: SDKs add retry
// counts and request ids. A request that matches and passes the checks is
// answered with the recorded status, Content-Type and body, a stream as it
// was recorded, and cut where it was cut; one the gateway refuses gets the
// gateway's own refusal, which must be the one recorded (else the gateway,
// not the agent, has diverged). Calls are reported to Record as live ones
// are, so Usage comes out as it did.
//
// A request that does not match, or comes after the last call recorded, is
// a divergence, and ends the replay for good: that request and every later
// one get 409 (a JSON error in the usual form), Err returns the
// *DivergedError, and Tape.OnDiverge is called once, so the caller can stop
// the agent at once. Done, called once the agent has finished, also reports
// an agent that made fewer calls than recorded. Requests the agent makes at
// once are matched in the order their bodies are read: an agent whose
// concurrent requests finish in another order than they did diverges.
//
// A real agent CLI puts session ids, dates and other framing in its
// requests, which differ from run to run. With Tape.MatchConversation a
// request whose digest is not the recorded one's matches a recorded call
// not yet matched (the next first, then later ones in order) of the same
// gateway, method and target that continues the same conversation: the
// same model and, in order, the same tool calls and tool results
// (Anthropic's tool_use and tool_result blocks, the Responses API's
// function and custom tool calls and their outputs, Chat Completions'
// tool_calls and tool messages). What the agent observed must be what it
// observed when recorded; its framing may differ. Tape.Loose counts such
// matches.
//
// Limits: a Tape holds at most 100,000 calls, 256 MiB of bodies (distinct
// ones, with the responses being recorded) and 128 MiB of call lines
// (counted at 400 bytes plus 6 a byte of their strings); so a file is at
// most MaxRecordingSize. Beyond a limit recording fails, for good and never
// silently: Err returns an error wrapping ErrTapeFull, every later request
// is refused (503) rather than spend the key on a trial that has failed, and
// WriteTo writes nothing. ReadTape holds a recording's bodies in memory.
//
// Reading: Exchanges returns a Tape's calls with their bodies, in order,
// and Exchange.Usage reads a response's usage again as the Gateway did.
// A Tape made with KeepServing records calls to be read (a trajectory),
// not replayed: past a limit it stops recording and refuses nothing;
// Exchanges then returns the calls before the loss, with ErrTapeFull.
//
// # What the agent may ask
//
// The key is the operator's, shared by every trial run with it. Providers
// offer more under it than a model: tools they run on their side, which
// fetch from the internet (web search and fetch, MCP servers, code execution
// in their containers, media given by URL), and stored objects (stored
// completions and responses, conversations, prompts, files, batches, vector
// stores), which hold other trials' data. So a Gateway relays an
// allow-list, and refuses (403) all else.
//
// Endpoints: the path below the upstream's path must end in one of these
// segment lists (so /v1 may be in the upstream's URL or in the path, and an
// Azure deployment path may precede them), with nothing after it:
//
//   - POST chat/completions, completions, responses, messages,
//     messages/count_tokens, embeddings;
//   - GET models, models/{id} (one non-empty segment).
//
// No segment before it may name a stored collection (assistants, batches,
// containers, conversations, evals, files, fine_tuning, responses, threads,
// uploads, vector_stores): POST /v1/threads/{id}/messages is the Assistants
// API, not Anthropic's /v1/messages. A segment that decodes to something
// holding a slash, backslash, '?', '#', '%' or control character is refused,
// lest the upstream decode it into another path. HEAD, OPTIONS, PUT, PATCH
// and DELETE are never offered. So GET /v1/chat/completions (the stored
// completions), /v1/responses/{id}, /v1/files, /v1/batches,
// /v1/vector_stores, /v1/messages/batches are all refused.
//
// Request bodies (every POST): the body must be one JSON object in UTF-8,
// without Content-Encoding; a body the gateway cannot read as JSON could be
// read as JSON by the provider (Python's json takes NaN and UTF-16), so it
// is refused (400) rather than forwarded. The whole body is checked, however
// large, and refused (400) if objects and arrays nest in it more than 128
// levels deep. Top-level fields, a tool's "type" member, and the types and
// members of content (below) are matched ignoring case; "tools", "prompt"
// or a tool's "type" given twice is refused: parsers differ on which copy
// wins.
//
//   - mcp_servers (Anthropic's MCP connector), container (Anthropic's code
//     execution containers and skills), web_search_options (OpenAI Chat
//     Completions' web search) and conversation (OpenAI's stored
//     conversations) are refused, whatever their value, and so is prompt
//     when it is an object (a stored prompt, which may carry tools of its
//     own; Completions' prompt, a string or an array, passes). The agent
//     cannot make a conversation or a prompt through the gateway, so one it
//     names is someone else's;
//   - tools, when not null, must be an array of objects, each either without
//     "type" but with "input_schema" (an Anthropic custom tool), or with a
//     "type" from this list of tools the agent's own program runs: function,
//     custom, computer_use_preview, local_shell, apply_patch, tool_search
//     with "execution" given once as "client" (Codex runs that search
//     itself), and Anthropic's bash_, text_editor_ and computer_ followed by
//     an eight-digit date (bash_20250124). Everything else is refused:
//     web_search*, web_fetch_*, code_execution_*, code_interpreter,
//     file_search, mcp, mcp_toolset, image_generation, memory_*, the hosted
//     tool_search*, and shell, whose hosted form (environment
//     container_auto) runs in OpenAI's containers;
//   - a tool of type namespace groups tools under a name (Codex declares
//     its multi-agent tools as one): it is judged by the tools in it. Its
//     "tools" must be given once, as an array, and each of them must be a
//     tool this list lets through on its own, so a server-side tool is
//     refused inside a namespace as it is outside, and the reason names the
//     namespace. Namespaces may hold namespaces, at most 4 deep;
//   - tools are declared in input items too, and are judged there alike:
//     the "tools" of every object, at any depth, whose type (ignoring case)
//     is additional_tools (where Codex declares all its tools for models of
//     its "responses lite" kind, gpt-6.1-sol among them, leaving the body's
//     "tools" out) or tool_search_output (the tools a tool search run by
//     the agent loaded). Such an object giving "tools" twice is refused. A
//     "tools" member of any other object is data, and is not checked;
//   - tool_choice is not checked: it can only pick a tool declared in tools;
//   - content the provider would fetch from a URL or read from storage is
//     refused wherever it is: every object of the body, at any depth
//     (messages, input, tool results and outputs, a document's content), is
//     content of the type its "type" names. For these types, the members
//     listed must hold null or inline data: image_url (image_url, a string
//     or {"url": ...}), input_image (image_url, file_id), input_file
//     (file_url, file_id, file_data), file (file, an object with those
//     three; file_id, an Anthropic file source), image and document
//     (source, an object with url and file_id), and the forms of vLLM
//     (audio_url, video_url) and Mistral (document_url). Inline is a data:
//     URL (the scheme in any case), and for file_data also base64, a string
//     without ':' (OpenRouter fetches a URL given there); null is nothing.
//     A file_id is never inline: the agent cannot upload a file through the
//     gateway, so a file it names is someone else's. Anything else (a URL,
//     a number, an object of another shape) is refused, and so is
//     container_upload, whatever it holds. An element of a "content" array
//     is also checked for image_url, audio_url and video_url whatever its
//     type: vLLM reads a part without one by them. A "type" or member given
//     twice is checked in each copy. So base64 images and documents, text,
//     Anthropic's search_result (whose source is text the agent gives) and
//     a URL among a tool call's arguments pass.
//
// previous_response_id (and item_reference ids in input) pass: they name
// responses stored under the key, but the agent makes those itself,
// through the gateway (store is true by default), and agents chain turns
// with them; refusing them would break such agents. Another trial's
// response is reachable only by its id, which is unguessable, and no
// endpoint that lists or reads responses is offered.
//
// Agent CLIs as shipped declare server-side tools of their own: Codex
// 0.169.0 a web_search tool (for most models), Claude Code 2.1.328 none in
// its requests, but its WebSearch tool, once called, makes a request that
// declares web_search_20250305. The gateway refuses those requests, whole;
// switching the tools off in the agent's own configuration is the agent
// recipe's job (Codex: -c 'web_search="disabled"'; Claude Code:
// --disallowedTools WebSearch,WebFetch). testdata/clients holds the
// requests these CLIs make, with and without those settings, as test
// vectors.
//
// Not checked: anything but the forms above. Content is refused by a list
// of the forms providers document: a provider that fetched by another
// member or type would fetch. A stored object another trial made is still
// reachable by its id where a request may name one (previous_response_id,
// an item_reference), should the id leak; the gateway does not force
// "store": false. Models that search the web by themselves (OpenAI's
// *-search-* models) do so whatever the body says.
package gateway
