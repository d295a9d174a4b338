package gateway_test

import (
	"fmt"

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
