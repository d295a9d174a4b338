package trajectory

import (
	"errors"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/gateway"
)

var fuzzTargets = []string{"/v1/messages", "/v1/responses", "/v1/chat/completions"}

// FuzzBuild feeds hostile bodies to every reader, as the first or second
// turn of a session: Build never panics, and whatever it builds is valid
// ATIF that encodes the same twice.
func FuzzBuild(f *testing.F) {
	seeds := 0
	for i, session := range [][]gateway.Exchange{anthropicSession(), responsesSession(responsesTurn2), responsesSession(responsesTurn2Chained), chatSession()} {
		for _, x := range session {
			f.Add(uint8(i), x.Request, x.Response, x.ContentType == "text/event-stream" || x.ContentType == sseType)
			seeds++
		}
	}
	if seeds == 0 {
		f.Fatal("no seeds")
	}
	f.Fuzz(func(t *testing.T, which uint8, req, resp []byte, stream bool) {
		target := fuzzTargets[int(which)%len(fuzzTargets)]
		ctype := jsonType
		if stream {
			ctype = "text/event-stream"
		}
		first := gateway.Exchange{Seq: 1, Gateway: "g", Method: "POST", Target: target, Request: req, Status: 200, ContentType: ctype, Response: resp}
		second := first
		second.Seq = 2
		for _, xs := range [][]gateway.Exchange{{first}, {first, second}} {
			tr, err := Build(xs, Options{})
			if errors.Is(err, ErrNoTurns) {
				continue // nothing readable that makes a step
			}
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			mustEncode(t, tr)
		}
	})
}
