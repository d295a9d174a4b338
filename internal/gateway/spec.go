package gateway

import (
	"fmt"
	"net/url"
	"strings"
)

// DummyKey is what NAME_API_KEY holds inside the sandbox. It has the "sk-"
// shape the OpenAI and Anthropic SDKs (and tools that check keys) accept, and
// is a credential nowhere: a Gateway drops it and sends the real key instead.
const DummyKey = "sk-proctor-gateway-placeholder"

// maxNameLen bounds a gateway name, so environment names stay sane.
const maxNameLen = 32

// Spec names one model provider and where its API lives.
//
// A Spec is a value; Upstream is shared between copies and must not be
// modified once the Spec is made.
type Spec struct {
	// Name is lower-case: a letter, then letters, digits or '_'. The
	// environment names derive from it (KeyEnv, BaseURLEnv).
	Name string
	// Upstream is the provider's base URL: http or https, a host, an optional
	// path; no user info, query or fragment.
	Upstream *url.URL
}

// ParseSpecs parses a comma-separated list of name=url entries, such as
// "openai=https://api.openai.com/v1,anthropic=https://api.anthropic.com".
// Blanks around entries are ignored; an empty list yields no specs. Errors
// wrap ErrSpec and name the entry at fault.
func ParseSpecs(s string) ([]Spec, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var specs []Spec
	seen := make(map[string]bool)
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		name, raw, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, specError(entry, "want name=url")
		}
		if strings.ContainsAny(raw, "?#") {
			return nil, specError(entry, "the URL must have no query or fragment")
		}
		u, err := url.Parse(raw)
		if err != nil {
			return nil, specError(entry, "the URL does not parse")
		}
		if u.User != nil {
			entry = name + "=" + u.Redacted() // name the entry, not its password
		}
		spec := Spec{Name: name, Upstream: u}
		if reason := spec.problem(); reason != "" {
			return nil, specError(entry, reason)
		}
		if seen[name] {
			return nil, specError(entry, fmt.Sprintf("gateway %q is given twice", name))
		}
		seen[name] = true
		specs = append(specs, spec)
	}
	return specs, nil
}

func specError(entry, reason string) error {
	return fmt.Errorf("%w %q: %s", ErrSpec, entry, reason)
}

// problem says what is wrong with s, or "" when nothing is.
func (s Spec) problem() string {
	if !validName(s.Name) {
		return fmt.Sprintf("name %q is not a lower-case letter followed by at most %d of [a-z0-9_]", s.Name, maxNameLen-1)
	}
	u := s.Upstream
	switch {
	case u == nil:
		return "no upstream URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("scheme %q is not http or https", u.Scheme)
	case u.Opaque != "" || u.Hostname() == "":
		return "the URL has no host"
	case u.User != nil:
		return "the URL must carry no user info: the key comes from the host environment"
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "the URL must have no query or fragment"
	case u.Path != "" && !strings.HasPrefix(u.Path, "/"):
		return "the URL path must be absolute"
	case hasDotSegment(u.Path) || strings.Contains(u.Path, "//"):
		return "the URL path must have no empty, . or .. segment"
	}
	return ""
}

func validName(name string) bool {
	if name == "" || len(name) > maxNameLen || name[0] < 'a' || name[0] > 'z' {
		return false
	}
	for _, c := range []byte(name) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

func hasDotSegment(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// KeyEnv is the variable holding the key: the real one on the host, DummyKey
// in the sandbox. For "openai" it is OPENAI_API_KEY.
func (s Spec) KeyEnv() string { return strings.ToUpper(s.Name) + "_API_KEY" }

// BaseURLEnv is the sandbox variable holding BaseURL. For "openai" it is
// OPENAI_BASE_URL.
func (s Spec) BaseURLEnv() string { return strings.ToUpper(s.Name) + "_BASE_URL" }

// BaseURL is the URL the agent is given for the gateway listening on
// listenAddr (host:port, as net.Addr.String gives it): plain http, the
// upstream's path kept, without a final slash. For
// openai=https://api.openai.com/v1 on 127.0.0.1:4100 it is
// http://127.0.0.1:4100/v1.
func (s Spec) BaseURL(listenAddr string) string {
	return "http://" + listenAddr + s.prefix()
}

// prefix is the upstream's escaped path without its final slash: every path
// the gateway relays is prefix itself or starts with prefix+"/".
func (s Spec) prefix() string {
	return strings.TrimSuffix(s.Upstream.EscapedPath(), "/")
}

// KeyFromEnv reads the real key for s from the host's environment through
// getenv (os.Getenv, in production). An unset or empty variable is a
// *MissingKeyError naming it.
func KeyFromEnv(s Spec, getenv func(string) string) (string, error) {
	key := getenv(s.KeyEnv())
	if key == "" {
		return "", &MissingKeyError{Env: s.KeyEnv(), Gateway: s.Name}
	}
	return key, nil
}
