package gateway

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkRoundTrip compares a request through the gateway with the same
// request sent to the upstream directly; the upstream echoes the body.
func BenchmarkRoundTrip(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"small", 200}, {"1MiB", 1 << 20}} {
		body := jsonBody(size.n)
		hs := newHarness(b, config{path: "/v1"}, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(w, r.Body)
		})
		for _, via := range []struct{ name, url string }{
			{"direct", hs.up.URL + "/v1/chat/completions"},
			{"gateway", hs.base + "/chat/completions"},
		} {
			b.Run(size.name+"/"+via.name, func(b *testing.B) {
				b.SetBytes(int64(2 * size.n))
				b.ReportAllocs()
				for b.Loop() {
					resp, err := hs.client.Post(via.url, "application/json", bytes.NewReader(body))
					if err != nil {
						b.Fatal(err)
					}
					n, err := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err != nil || n != int64(size.n) || resp.StatusCode != 200 {
						b.Fatalf("status %d, %d bytes, %v", resp.StatusCode, n, err)
					}
				}
			})
		}
	}
}

// BenchmarkCheckBody checks bodies of 8 MiB: a screenshot in a tool result,
// and numbers nested as deep as allowed, which a walk reading each value
// once for each array around it would take 128 times over.
func BenchmarkCheckBody(b *testing.B) {
	for _, body := range []struct {
		name string
		b    []byte
	}{
		{"image", []byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` +
			strings.Repeat("iVBO", 2<<20) + `"}}]}]}]}`)},
		{"deep", deepBody(maxDepth, strings.Repeat("1,", 4<<20)+"1")},
	} {
		b.Run(body.name, func(b *testing.B) {
			b.SetBytes(int64(len(body.b)))
			for b.Loop() {
				if status, reason := checkBody(http.Header{}, body.b); status != 0 {
					b.Fatal(reason)
				}
			}
		})
	}
}
