package recipe

import (
	"fmt"
	"sort"
	"strings"
)

// Provider is a model provider an agent can be pointed at through a model
// gateway of the same name: the agent gets NAME_BASE_URL and a dummy
// NAME_API_KEY, the gateway the host's NAME_API_KEY.
type Provider struct {
	Name string
	// Upstream is the gateway's default upstream, which
	// --model-gateway NAME=URL replaces.
	Upstream string
}

// providers are those whose API the gateway relays.
var providers = map[string]Provider{
	"anthropic": {Name: "anthropic", Upstream: "https://api.anthropic.com"},
	"openai":    {Name: "openai", Upstream: "https://api.openai.com/v1"},
}

// unsupported are providers an agent may name that cannot go through a
// gateway, and why.
var unsupported = map[string]string{
	"google":  "the Gemini API (generateContent) is not one the model gateway relays: it offers the OpenAI and Anthropic APIs",
	"gemini":  "the Gemini API (generateContent) is not one the model gateway relays: it offers the OpenAI and Anthropic APIs",
	"vertex":  "Vertex AI authenticates with Google credentials the agent would have to hold, not a key the gateway adds",
	"bedrock": "Amazon Bedrock signs each request with AWS credentials (SigV4) the agent would have to hold, not a key the gateway adds",
}

// knownProvider reports a provider name a recipe may list: one the gateway
// relays, or one it refuses with a reason (the recipe is refused when
// used).
func knownProvider(name string) bool {
	_, ok := providers[name]
	_, no := unsupported[name]
	return ok || no
}

// Usable reports why the recipe cannot run at all, or nil: none of its
// providers can go through a gateway.
func (r *Recipe) Usable() error {
	var first error
	for _, p := range r.Providers {
		_, err := LookupProvider(p)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return fmt.Errorf("%s: %w", r.Name, first)
}

// LookupProvider returns the provider of that name, or why there is none.
func LookupProvider(name string) (Provider, error) {
	if p, ok := providers[name]; ok {
		return p, nil
	}
	if why, ok := unsupported[name]; ok {
		return Provider{}, fmt.Errorf("%w %s: cannot go through a model gateway: %s", ErrProvider, name, why)
	}
	names := make([]string, 0, len(providers))
	for n := range providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return Provider{}, fmt.Errorf("%w %q: unknown (want %s)", ErrProvider, name, strings.Join(names, ", "))
}
