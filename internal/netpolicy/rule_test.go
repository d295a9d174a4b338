package netpolicy

import (
	"errors"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	tests := []struct {
		in, want string
		wildcard bool
		port     int
	}{
		{in: "api.example.com", want: "api.example.com"},
		{in: "API.Example.COM.", want: "api.example.com"},
		{in: "  api.example.com\t", want: "api.example.com"},
		{in: "api.example.com:8443", want: "api.example.com:8443", port: 8443},
		{in: "*.example.com", want: "*.example.com", wildcard: true},
		{in: "*.Example.com.:443", want: "*.example.com:443", wildcard: true, port: 443},
		{in: "*.provider.test", want: "*.provider.test", wildcard: true},
		{in: "*.example.co.uk", want: "*.example.co.uk", wildcard: true},
		{in: "localhost:5432", want: "localhost:5432", port: 5432},
		{in: "_srv.example.com", want: "_srv.example.com"},
		{in: "xn--bcher-kva.de", want: "xn--bcher-kva.de"},
		{in: "10.1.2.3", want: "10.1.2.3"},
		{in: "10.1.2.3:5432", want: "10.1.2.3:5432", port: 5432},
		{in: "[2001:db8::1]:443", want: "[2001:db8::1]:443", port: 443},
		{in: "[2001:DB8::1]", want: "[2001:db8::1]"},
		{in: "2001:db8::1", want: "[2001:db8::1]"},
		{in: "[::ffff:10.1.2.3]:80", want: "10.1.2.3:80", port: 80},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := ParseRule(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if r.String() != tt.want || r.Wildcard() != tt.wildcard || r.Port() != tt.port {
				t.Errorf("got %q wildcard %v port %d, want %q %v %d", r, r.Wildcard(), r.Port(), tt.want, tt.wildcard, tt.port)
			}
			again, err := ParseRule(r.String())
			if err != nil || again != r {
				t.Errorf("String does not parse back: %v, %v", again, err)
			}
		})
	}
}

func TestParseRuleErrors(t *testing.T) {
	tests := []struct{ in, reason string }{
		{"", "empty entry"},
		{"   ", "empty entry"},
		{"*", `bare "*"`},
		{"*:443", `bare "*"`},
		{"*.com", "single label"},
		{"*.test", "single label"},
		{"*.co.uk", "public suffix"},
		{"*.github.io", "public suffix"},
		{"*.*.example.com", "whole first label"},
		{"a.*.example.com", "whole first label"},
		{"*example.com", "whole first label"},
		{"**.example.com", "whole first label"},
		{"*.10.1.2.3", "wildcard over an IP address"},
		{"*.", "empty host"},
		{"https://api.example.com", "URL scheme"},
		{"api.example.com/v1", "path"},
		{"api.example.com?x", "path"},
		{"user@api.example.com", "user info"},
		{"user:pw@api.example.com", "user info"},
		{"api.example.com:0", "out of range"},
		{"api.example.com:65536", "out of range"},
		{"api.example.com:https", "bad port"},
		{"api.example.com:", "bad port"},
		{"api.example.com:+443", "bad port"},
		{"api.example.com:443:80", "invalid IPv6 address"},
		{"bücher.de", "punycode"},
		{"\u212a.example.com", "punycode"},
		{"api example.com", "white space"},
		{"api%2eexample.com", "percent"},
		{"-api.example.com", "starts or ends with '-'"},
		{"a..example.com", "empty label"},
		{"api.example.com..", "empty label"},
		{strings.Repeat("a", 64) + ".example.com", "longer than 63"},
		{strings.Repeat("a.", 127) + "com", "longer than 253"},
		{"0x7f.1", "dotted-quad"},
		{"2130706433", "dotted-quad"},
		{"127.1", "dotted-quad"},
		{"0177.0.0.1", "dotted-quad"},
		{"1.2.3.4.5", "dotted-quad"},
		{"example.123", "dotted-quad"},
		{"[10.1.2.3]", "invalid IPv6"},
		{"[fe80::1%eth0]", "percent"},
		{"fe80::1%eth0", "invalid IPv6"},
		{"[::1", "missing ']'"},
		{"[::1]x", "after ']'"},
		{"api_ex<ample.com", "invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseRule(tt.in)
			var re *RuleError
			if !errors.As(err, &re) || !errors.Is(err, ErrBadRule) {
				t.Fatalf("err = %v, want a *RuleError", err)
			}
			if !strings.Contains(re.Reason, tt.reason) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %q, want a one-line reason containing %q", err, tt.reason)
			}
		})
	}
}

func TestParseAllowList(t *testing.T) {
	a, err := ParseAllowList([]string{"api.example.com", "*.example.org:8443"})
	if err != nil || len(a) != 2 {
		t.Fatalf("%v, %v", a, err)
	}
	_, err = ParseAllowList([]string{"api.example.com", "ok.example.org", "*.co.uk"})
	want := `netpolicy: allow-list entry 2 "*.co.uk": wildcard over the public suffix "co.uk" would allow unrelated owners' names`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	if a, err := ParseAllowList(nil); err != nil || len(a) != 0 {
		t.Errorf("empty list: %v, %v", a, err)
	}
}

func TestMatch(t *testing.T) {
	list, err := ParseAllowList([]string{
		"api.example.com",
		"*.example.org",
		"db.example.org:5432",
		"git.example.net:22",
		"10.1.2.3:8080",
		"[2001:db8::1]",
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host string
		port int
		rule string // "" for no match
	}{
		{"api.example.com", 443, "api.example.com"},
		{"api.example.com", 80, "api.example.com"},
		{"API.EXAMPLE.COM.", 443, "api.example.com"},
		{"api.example.com", 8443, ""},
		{"api.example.com", 22, ""},
		{"x.api.example.com", 443, ""},
		{"example.com", 443, ""},
		{"api.example.com.evil.test", 443, ""},
		{"apiXexample.com", 443, ""},
		{"a.example.org", 443, "*.example.org"},
		{"a.b.c.example.org", 80, "*.example.org"},
		{"example.org", 443, ""},
		{"badexample.org", 443, ""},
		{"a.example.org", 8080, ""},
		{"db.example.org", 5432, "db.example.org:5432"},
		{"db.example.org", 443, "*.example.org"},
		{"git.example.net", 22, "git.example.net:22"},
		{"git.example.net", 443, ""},
		{"10.1.2.3", 8080, "10.1.2.3:8080"},
		{"10.1.2.3", 443, ""},
		{"::ffff:10.1.2.3", 8080, "10.1.2.3:8080"},
		{"[::ffff:10.1.2.3]", 8080, "10.1.2.3:8080"},
		{"0x0a.1.2.3", 8080, ""},
		{"167838211", 8080, ""},
		{"10.1.515", 8080, ""},
		{"2001:db8::1", 443, "[2001:db8::1]"},
		{"[2001:DB8:0::1]", 80, "[2001:db8::1]"},
		{"[2001:db8::1%eth0]", 443, ""},
		{"\u212aa.example.org", 443, ""}, // Kelvin sign, not "k"
		{"a.example.org\x00", 443, ""},
		{"", 443, ""},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			r, ok := list.Match(tt.host, tt.port)
			if ok != (tt.rule != "") || r.String() != tt.rule {
				t.Errorf("Match(%q, %d) = %q, %v; want %q", tt.host, tt.port, r, ok, tt.rule)
			}
		})
	}
}

// An exact rule wins over a wildcard that also matches, wherever it is
// in the list, because only an exact rule may reach private addresses.
func TestMatchPrefersExact(t *testing.T) {
	list, err := ParseAllowList([]string{"*.example.com", "db.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := list.Match("db.example.com", 443)
	if !ok || r.Wildcard() {
		t.Errorf("got %v, %v; want the exact rule", r, ok)
	}
}
