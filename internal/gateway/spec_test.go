package gateway

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSpecs(t *testing.T) {
	got, err := ParseSpecs(" openai=https://api.openai.com/v1 , anthropic=https://api.anthropic.com,local_2=http://127.0.0.1:8080/")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, upstream, keyEnv, baseEnv, base string }{
		{"openai", "https://api.openai.com/v1", "OPENAI_API_KEY", "OPENAI_BASE_URL", "http://127.0.0.1:4100/v1"},
		{"anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "http://127.0.0.1:4100"},
		{"local_2", "http://127.0.0.1:8080/", "LOCAL_2_API_KEY", "LOCAL_2_BASE_URL", "http://127.0.0.1:4100"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d specs, want %d", len(got), len(want))
	}
	for i, w := range want {
		s := got[i]
		if s.Name != w.name || s.Upstream.String() != w.upstream || s.KeyEnv() != w.keyEnv ||
			s.BaseURLEnv() != w.baseEnv || s.BaseURL("127.0.0.1:4100") != w.base {
			t.Errorf("spec %d: %s %s %s %s %s; want %+v", i, s.Name, s.Upstream, s.KeyEnv(), s.BaseURLEnv(), s.BaseURL("127.0.0.1:4100"), w)
		}
	}
	if specs, err := ParseSpecs("  "); specs != nil || err != nil {
		t.Errorf("ParseSpecs of blanks = %v, %v; want none", specs, err)
	}
}

func TestParseSpecsRefuses(t *testing.T) {
	for _, tc := range []struct{ in, entry, why string }{
		{"openai", "openai", "want name=url"},
		{"openai=https://a/v1,openai=https://b/v1", "openai=https://b/v1", "given twice"},
		{"OpenAI=https://a", "OpenAI=https://a", "name"},
		{"1x=https://a", "1x=https://a", "name"},
		{"=https://a", "=https://a", "name"},
		{"a-b=https://a", "a-b=https://a", "name"},
		{"x=ftp://a/", "x=ftp://a/", "scheme"},
		{"x=api.openai.com/v1", "x=api.openai.com/v1", "scheme"},
		{"x=https://user:pw@a/", "x=https://user:xxxxx@a/", "user info"},
		{"x=https://a/v1?key=1", "x=https://a/v1?key=1", "query"},
		{"x=https://a/v1?", "x=https://a/v1?", "query"},
		{"x=https://a/v1#", "x=https://a/v1#", "fragment"},
		{"x=https:///v1", "x=https:///v1", "host"},
		{"x=https:opaque", "x=https:opaque", "host"},
		{"x=https://a/v1/../admin", "x=https://a/v1/../admin", ". or .."},
		{"x=https://a//v1", "x=https://a//v1", "empty"},
		{"x=https://a b/", "x=https://a b/", "parse"},
		{"a=https://a,,b=https://b", "", "want name=url"},
	} {
		_, err := ParseSpecs(tc.in)
		if !errors.Is(err, ErrSpec) {
			t.Errorf("ParseSpecs(%q) = %v, want ErrSpec", tc.in, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, `"`+tc.entry+`"`) || !strings.Contains(msg, tc.why) || strings.Contains(msg, "\n") {
			t.Errorf("ParseSpecs(%q): error %q should be one line naming %q and saying %q", tc.in, msg, tc.entry, tc.why)
		}
	}
}

func TestKeyFromEnv(t *testing.T) {
	specs, err := ParseSpecs("openai=https://api.openai.com/v1")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OPENAI_API_KEY": "sk-real-123456"}
	key, err := KeyFromEnv(specs[0], func(k string) string { return env[k] })
	if key != "sk-real-123456" || err != nil {
		t.Errorf("KeyFromEnv = %q, %v", key, err)
	}
	env["OPENAI_API_KEY"] = ""
	_, err = KeyFromEnv(specs[0], func(k string) string { return env[k] })
	var missing *MissingKeyError
	if !errors.As(err, &missing) || missing.Env != "OPENAI_API_KEY" {
		t.Fatalf("KeyFromEnv with the variable empty = %v, want a *MissingKeyError", err)
	}
	if want := "OPENAI_API_KEY is not set on the host: the openai gateway needs the real key"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestNewRefuses(t *testing.T) {
	specs, err := ParseSpecs("openai=https://api.openai.com/v1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Spec: specs[0], Key: "bad key with spaces"}); !errors.Is(err, ErrKey) {
		t.Errorf("New with a bad key = %v, want ErrKey", err)
	}
	if _, err := New(Options{Spec: Spec{Name: "x"}, Key: "sk-real-123456"}); !errors.Is(err, ErrSpec) {
		t.Errorf("New without upstream = %v, want ErrSpec", err)
	}
}
