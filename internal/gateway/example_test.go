package gateway_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/proctor-sandbox/proctor/internal/gateway"
)

// The environment a sandbox gets for its gateways, when they listen on
// 127.0.0.1:4100 and 127.0.0.1:4101.
func ExampleParseSpecs() {
	specs, err := gateway.ParseSpecs("openai=https://api.openai.com/v1,anthropic=https://api.anthropic.com")
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, s := range specs {
		fmt.Printf("%s=%s\n", s.BaseURLEnv(), s.BaseURL(fmt.Sprintf("127.0.0.1:%d", 4100+i)))
		fmt.Printf("%s=%s\n", s.KeyEnv(), gateway.DummyKey)
	}
	// Output:
	// OPENAI_BASE_URL=http://127.0.0.1:4100/v1
	// OPENAI_API_KEY=sk-proctor-gateway-placeholder
	// ANTHROPIC_BASE_URL=http://127.0.0.1:4101
	// ANTHROPIC_API_KEY=sk-proctor-gateway-placeholder
}

func ExampleKeyFromEnv() {
	specs, _ := gateway.ParseSpecs("openai=https://api.openai.com/v1")
	_, err := gateway.KeyFromEnv(specs[0], func(string) string { return "" })
	fmt.Println(err)
	// Output:
	// OPENAI_API_KEY is not set on the host: the openai gateway needs the real key
}

func ExampleParseSpecs_refused() {
	_, err := gateway.ParseSpecs("openai=https://user:secret@api.openai.com/v1")
	fmt.Println(err)
	// Output:
	// invalid gateway spec "openai=https://user:xxxxx@api.openai.com/v1": the URL must carry no user info: the key comes from the host environment
}

// A recording of one refused call, read back, then with its body changed.
func ExampleReadTape() {
	body := `{"type":"error","error":{"message":"proctor gateway: endpoint not offered"}}` + "\n"
	sum := sha256.Sum256([]byte(body))
	digest := hex.EncodeToString(sum[:])
	recording := `{"schema":"proctor.recording/v1","calls":1,"blobs":1}
{"seq":1,"gateway":"openai","method":"GET","target":"/v1/files","request_sha256":"","request_bytes":0,"status":403,"content_type":"application/json","response_sha256":"` + digest + `","response_bytes":` + fmt.Sprint(len(body)) + `}
{"sha256":"` + digest + `","base64":"` + base64.StdEncoding.EncodeToString([]byte(body)) + `"}
`
	_, err := gateway.ReadTape(strings.NewReader(recording), gateway.MaxRecordingSize)
	fmt.Println(err)

	changed := strings.Replace(body, "not offered", "offered!!!!", 1)
	tampered := strings.Replace(recording, base64.StdEncoding.EncodeToString([]byte(body)), base64.StdEncoding.EncodeToString([]byte(changed)), 1)
	_, err = gateway.ReadTape(strings.NewReader(tampered), gateway.MaxRecordingSize)
	fmt.Println(err)
	// Output:
	// <nil>
	// recording tampered with: line 3, field "base64": the body hashes to sha256:5c827e920489…, the line says sha256:38ea71493c83…
}
