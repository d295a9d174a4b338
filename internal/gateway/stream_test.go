package gateway

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestKeyNeverReachesAgent makes the upstream echo the real key every way it
// can: the agent must not get it, whole or in any letter case.
func TestKeyNeverReachesAgent(t *testing.T) {
	k := testKey
	sse := []string{
		"data: {\"a\":\"" + k[:7], k[7:] + "\"}\n\n", // split across writes
		"data: " + k[:len(k)-1], "!" + k[:3], k[3:] + k + "\n\n", // a near miss, then two in a row
		"data: tail " + k[:10], // ends on a prefix of the key, which must come through
	}
	compressed := func(enc string, s string) []byte {
		var b bytes.Buffer
		var w io.WriteCloser = gzip.NewWriter(&b)
		if enc == "deflate" {
			w = zlib.NewWriter(&b)
		}
		io.WriteString(w, s)
		w.Close()
		return b.Bytes()
	}
	usage := `,"model":"m","usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`
	for _, tc := range []struct {
		name   string
		answer http.HandlerFunc
		status int
		body   string // what the agent must get; "" to skip the check
		tokens int64
		holds  string // what the body must hold
	}{
		{"stream and headers", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("X-Echo", "Bearer "+k)
			w.Header().Set("X-"+k, "in the name")
			w.Header().Set("Www-Authenticate", `Bearer error="invalid_token" key=`+k)
			w.Header().Add("Link", k)
			for _, part := range sse {
				io.WriteString(w, part)
				w.(http.Flusher).Flush()
				time.Sleep(5 * time.Millisecond)
			}
		}, 200, strings.ReplaceAll(strings.Join(sse, ""), k, redacted), 0, redacted},
		{"error body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided: `+k+`"}}`)
		}, 401, `{"error":{"message":"Incorrect API key provided: ` + redacted + `"}}`, 0, ""},
		{"echo of the request", func(w http.ResponseWriter, r *http.Request) {
			r.Header.Write(w)
		}, 200, "", 0, "Authorization: Bearer " + redacted},
		{"gzip though identity was asked", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(compressed("gzip", `{"k":"`+k+`"`+usage))
		}, 200, `{"k":"` + redacted + `"` + usage, 7, ""},
		{"deflate", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "deflate")
			w.Write(compressed("deflate", `{"k":"`+k+`"`+usage))
		}, 200, `{"k":"` + redacted + `"` + usage, 7, ""},
		{"encoding it cannot scrub", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "br")
			io.WriteString(w, k)
		}, 502, "", 0, "proctor gateway"},
		{"bad gzip", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			io.WriteString(w, k)
		}, 502, "", 0, "proctor gateway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := newHarness(t, config{path: "/v1", tls: true}, tc.answer)
			b := raw(t, hs.addr, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
			noKey(t, "the raw response", b)
			resp, body := parse(t, b)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.body != "" && string(body) != tc.body {
				t.Errorf("body %q, want %q", body, tc.body)
			}
			if !strings.Contains(string(body), tc.holds) {
				t.Errorf("body %q does not hold %q", body, tc.holds)
			}
			if tc.status == 200 && resp.Header.Get("Content-Encoding") != "" {
				t.Errorf("Content-Encoding %q relayed with a decoded body", resp.Header.Get("Content-Encoding"))
			}
			calls := hs.rec.wait(t, 1)
			noKeyInCalls(t, calls)
			if calls[0].TotalTokens != tc.tokens {
				t.Errorf("total tokens %d, want %d", calls[0].TotalTokens, tc.tokens)
			}
		})
	}
}

// TestStreamsIncrementally checks that an event reaches the agent while the
// upstream is still working on the rest.
func TestStreamsIncrementally(t *testing.T) {
	modes(t, func(t *testing.T, tls bool) {
		release := make(chan struct{})
		hs := newHarness(t, config{name: "anthropic", tls: tls}, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"c\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			io.WriteString(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\n")
		})
		resp, err := hs.client.Post(hs.base+"/v1/messages", "application/json", strings.NewReader(`{"model":"c","stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		first := make(chan string, 1)
		br := bufio.NewReader(resp.Body)
		go func() {
			var ev strings.Builder
			for {
				line, err := br.ReadString('\n')
				ev.WriteString(line)
				if line == "\n" || err != nil {
					break
				}
			}
			first <- ev.String()
		}()
		select {
		case ev := <-first:
			if !strings.Contains(ev, "message_start") {
				t.Fatalf("first event %q", ev)
			}
			if n := hs.g.buffered.Load(); n != 0 {
				t.Errorf("the request body still counts as held (%d bytes) while the answer streams", n)
			}
		case <-time.After(5 * time.Second):
			close(release)
			t.Fatal("the first event did not arrive while the upstream held the rest back")
		}
		close(release)
		rest, err := io.ReadAll(br)
		if err != nil || !strings.Contains(string(rest), "message_delta") {
			t.Fatalf("rest %q, %v", rest, err)
		}
		c := hs.rec.wait(t, 1)[0]
		if c.Model != "c" || c.InputTokens != 5 || c.OutputTokens != 9 || c.TotalTokens != 14 || c.Error != "" {
			t.Errorf("recorded %+v", c)
		}
	})
}
