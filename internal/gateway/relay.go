package gateway

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// credentialHeaders are never forwarded as the agent sent them.
var credentialHeaders = []string{
	"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key", "Proxy-Authorization", "Cookie",
}

// credentialParams are query parameters never forwarded (compared in lower case).
var credentialParams = map[string]bool{"key": true, "api_key": true, "api-key": true, "apikey": true}

// relayStep is how much of a response body is read, relayed and flushed at
// a time.
const relayStep = 32 << 10

// relay serves one request: check it, read its body, send it upstream, relay
// the response (replaying: answer as recorded instead). On a failure after
// the response has begun it aborts the connection (panic
// http.ErrAbortHandler), so the agent sees a cut response, not a short one.
func (g *Gateway) relay(w http.ResponseWriter, r *http.Request, x *exchange) {
	rawQuery, status, reason := g.admit(r)
	if status != 0 {
		g.refuse(w, x, status, reason)
		return
	}
	x.target = tapeString(forwardedTarget(r, rawQuery))
	body, status, err := g.readBody(r)
	held := int64(cap(body))
	release := func() { g.buffered.Add(-held); held = 0 }
	defer release()
	if err != nil {
		g.refuse(w, x, status, err.Error())
		return
	}
	sum := sha256.Sum256(body)
	x.call.RequestSHA256 = hex.EncodeToString(sum[:])
	x.call.BytesUp = int64(len(body))
	x.call.Model = requestModel(body)
	if g.inspect != nil {
		x.sink.look = g.inspect(x.call, body)
	}
	if status, reason := g.takeTurn(x, body); status != 0 {
		g.refuse(w, x, status, reason)
		return
	}
	if r.Method == http.MethodPost {
		if status, reason := checkBody(r.Header, body); status != 0 {
			g.refuse(w, x, status, reason)
			return
		}
	}

	out, err := g.outgoing(r, rawQuery, body)
	if err != nil {
		g.refuse(w, x, http.StatusInternalServerError, err.Error())
		return
	}
	if g.replay != nil {
		g.replayResponse(w, x) // instead of the upstream
		return
	}
	resp, err := g.transport.RoundTrip(out)
	release() // the transport has sent the body, or given up (near enough)
	if err != nil {
		g.refuse(w, x, http.StatusBadGateway, g.cause(r, err))
		return
	}
	defer resp.Body.Close()

	var src io.Reader = resp.Body
	enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
	if r.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		enc = "" // no body to decode
	}
	switch {
	case resp.StatusCode == http.StatusSwitchingProtocols:
		g.refuse(w, x, http.StatusBadGateway, "the upstream switched protocols; upgrades are not relayed")
		return
	case enc == "" || enc == "identity":
	case enc == "gzip" || enc == "x-gzip":
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			g.refuse(w, x, http.StatusBadGateway, "upstream: bad gzip body: "+err.Error())
			return
		}
		src = zr
	case enc == "deflate":
		zr, err := zlib.NewReader(resp.Body)
		if err != nil {
			g.refuse(w, x, http.StatusBadGateway, "upstream: bad deflate body: "+err.Error())
			return
		}
		src = zr
	default:
		g.refuse(w, x, http.StatusBadGateway, fmt.Sprintf("the upstream sent content encoding %q, which the gateway cannot decode and so cannot scrub", enc))
		return
	}

	copyResponseHeader(w.Header(), resp.Header, g.key)
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	x.sink.m = newMeter(mt == "text/event-stream")
	x.call.Status = resp.StatusCode
	w.WriteHeader(resp.StatusCode)
	if x.sink.flush() != nil {
		x.call.Error = g.clientGone()
		return
	}
	sc := newScrubber(x.sink, g.key)
	buf := make([]byte, relayStep)
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			sc.Write(buf[:n]) // its errors are the sink's, kept in x.sink.err
			if x.sink.flush() != nil {
				x.call.Error = g.clientGone()
				return
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			x.call.Error = g.cause(r, rerr)
			x.cut = true
			panic(http.ErrAbortHandler)
		}
	}
	sc.Close()
	if x.sink.flush() != nil {
		x.call.Error = g.clientGone()
	}
}

// cause words an upstream failure for Call.Error, telling apart the cuts the
// gateway or the agent made.
func (g *Gateway) cause(r *http.Request, err error) string {
	if g.ctx.Err() != nil || r.Context().Err() != nil {
		return g.clientGone()
	}
	return scrubString("upstream: "+err.Error(), g.key)
}

// clientGone words a cut connection to the agent for Call.Error.
func (g *Gateway) clientGone() string {
	if g.ctx.Err() != nil {
		return "cut by Close"
	}
	return "client went away"
}

// refuse answers the request itself, with an error body both the OpenAI and
// the Anthropic SDKs show the message of. With a Tape or a Replay, a request
// refused before its body was read takes its turn on it here; replaying, a
// refusal must be the one recorded, else the replay has diverged.
func (g *Gateway) refuse(w http.ResponseWriter, x *exchange, status int, reason string) {
	if !x.taped {
		if s, why := g.takeTurn(x, nil); s != 0 {
			status, reason = s, why
		}
	}
	reason = scrubString(reason, g.key)
	body := errorBody(reason)
	if s, why := g.sameRefusal(x, status, body); s != 0 {
		status, reason = s, scrubString(why, g.key)
		body = errorBody(reason)
	}
	x.call.Status = status
	if x.call.Error == "" {
		x.call.Error = reason
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if x.call.RequestSHA256 == "" {
		// The body was not read, or not all of it: do not wait for the rest.
		h.Set("Connection", "close")
	}
	w.WriteHeader(status)
	x.sink.Write(body)
}

// errorBody is the JSON error refuse sends, ending in a newline.
func errorBody(reason string) []byte {
	body, _ := json.Marshal(map[string]any{
		"type":  "error",
		"error": map[string]string{"type": "proctor_gateway_error", "message": "proctor gateway: " + reason},
	})
	return append(body, '\n')
}

// admit checks r's method and target, the endpoint included. It returns the
// query to forward, or the status and reason to refuse r with.
func (g *Gateway) admit(r *http.Request) (rawQuery string, status int, reason string) {
	if wantsWebSocket(r.Header) {
		return "", http.StatusUpgradeRequired, "WebSocket is not offered by the gateway: use HTTP"
	}
	switch r.Method {
	case http.MethodConnect:
		return "", http.StatusBadRequest, "CONNECT is not relayed"
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
	default:
		return "", http.StatusMethodNotAllowed, "method not allowed"
	}
	if !strings.HasPrefix(r.RequestURI, "/") || r.URL.Host != "" || r.URL.Scheme != "" || r.URL.Opaque != "" {
		return "", http.StatusBadRequest, "the request target must be a path (origin form), not an absolute URL or authority"
	}
	p := r.URL.Path
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\\x00") || hasDotSegment(p) {
		return "", http.StatusBadRequest, "the path must start with a single /, and hold no . or .. segment, backslash or NUL"
	}
	if ep := r.URL.EscapedPath(); g.prefix != "" && ep != g.prefix && !strings.HasPrefix(ep, g.prefix+"/") {
		return "", http.StatusNotFound, fmt.Sprintf("the path is outside %s", g.prefix)
	}
	rawQuery, err := filterQuery(r.URL.RawQuery)
	if err != nil {
		return "", http.StatusBadRequest, err.Error()
	}
	if ep := r.URL.EscapedPath(); !offered(r.Method, ep[len(g.prefix):]) {
		if len(ep) > maxPathLen {
			ep = ep[:maxPathLen]
		}
		return "", http.StatusForbidden, "endpoint not offered by the gateway: " + r.Method + " " + ep
	}
	return rawQuery, 0, ""
}

// wantsWebSocket reports whether a request with the header h asks to
// switch to WebSocket: an Upgrade header (of any number of lines) names it
// among its protocols, in any case, with or without a version.
//
// Such a request is answered 426 Upgrade Required, whatever its method and
// target, and never relayed: Codex falls back to HTTP at once on a 426 to
// its WebSocket handshake, and retries the handshake on any other answer
// (codex-rs, core/src/client.rs, ModelClientSession's
// stream_responses_websocket, which turns UPGRADE_REQUIRED into
// WebsocketStreamOutcome::FallbackToHttp).
func wantsWebSocket(h http.Header) bool {
	for _, v := range h.Values("Upgrade") {
		for p := range strings.SplitSeq(v, ",") {
			name, _, _ := strings.Cut(strings.TrimSpace(p), "/")
			if strings.EqualFold(name, "websocket") {
				return true
			}
		}
	}
	return false
}

// filterQuery drops credential parameters from a raw query, keeping the rest
// as it was, in order.
func filterQuery(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	if strings.Contains(raw, ";") {
		return "", errors.New("the query must not hold ';'")
	}
	var kept []string
	for part := range strings.SplitSeq(raw, "&") {
		name, _, _ := strings.Cut(part, "=")
		name, err := url.QueryUnescape(name)
		if err != nil {
			return "", errors.New("the query does not parse")
		}
		if !credentialParams[strings.ToLower(name)] {
			kept = append(kept, part)
		}
	}
	return strings.Join(kept, "&"), nil
}

// readBody reads r's body, within maxRequestBody and, together with the other
// bodies being held, maxBufferedBody (counted by capacity, from allocation
// until the transport has done with the body). The caller must give
// cap(body) back to g.buffered, on error too.
func (g *Gateway) readBody(r *http.Request) (body []byte, status int, err error) {
	tooLarge := fmt.Errorf("the request body is over %d bytes", g.maxBody)
	if r.ContentLength > int64(g.maxBody) {
		return nil, http.StatusRequestEntityTooLarge, tooLarge
	}
	src := io.LimitReader(r.Body, int64(g.maxBody)+1)
	for {
		if len(body) == cap(body) {
			// Exactly the announced length (and a byte to see EOF), else
			// doubling from 64 KiB; never past the limit and a byte.
			grow := max(cap(body), 64<<10)
			if cap(body) == 0 && r.ContentLength >= 0 {
				grow = int(r.ContentLength) + 1
			}
			grow = min(grow, g.maxBody+1-cap(body))
			if g.buffered.Add(int64(grow)) > g.maxHeld {
				g.buffered.Add(-int64(grow))
				return body, http.StatusServiceUnavailable, errors.New("the gateway holds too many request bodies; retry")
			}
			body = append(make([]byte, 0, cap(body)+grow), body...)
		}
		n, err := src.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if len(body) > g.maxBody {
			return body, http.StatusRequestEntityTooLarge, tooLarge
		}
		if err == io.EOF {
			return body, 0, nil
		}
		if err != nil {
			return body, http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err)
		}
	}
}

// requestModel is the "model" of a JSON request body, if any.
func requestModel(body []byte) string {
	if len(body) == 0 || len(body) > maxParse {
		return ""
	}
	var v struct {
		Model string `json:"model"`
	}
	json.Unmarshal(body, &v) // a field of another type leaves Model empty
	return clipModel(v.Model)
}

// outgoing builds the request to send upstream: the upstream's scheme and
// host, r's path, the filtered query, r's headers minus hop-by-hop and
// credential ones, and the real key.
func (g *Gateway) outgoing(r *http.Request, rawQuery string, body []byte) (*http.Request, error) {
	up := g.spec.Upstream
	u := &url.URL{Scheme: up.Scheme, Host: up.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: rawQuery}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building the upstream request: %w", err)
	}
	if out.URL.Scheme != up.Scheme || out.URL.Host != up.Host || out.Host != up.Host {
		return nil, errors.New("building the upstream request: it does not go to the upstream")
	}
	h := r.Header.Clone()
	keyHeader := "Authorization"
	switch {
	case h.Get("X-Api-Key") != "" || g.spec.Name == "anthropic":
		keyHeader = "X-Api-Key"
	case h.Get("Api-Key") != "":
		keyHeader = "Api-Key"
	case h.Get("X-Goog-Api-Key") != "":
		keyHeader = "X-Goog-Api-Key"
	}
	removeHopByHop(h)
	for _, name := range credentialHeaders {
		h.Del(name)
	}
	for name := range h {
		if accountHeader(name) {
			delete(h, name)
		}
	}
	h.Del("Expect")
	h.Set("Accept-Encoding", "identity")
	if keyHeader == "Authorization" {
		h.Set(keyHeader, "Bearer "+g.key)
	} else {
		h.Set(keyHeader, g.key)
	}
	out.Header = h
	return out, nil
}
