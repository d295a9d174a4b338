package netpolicy

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// FuzzClientHello feeds arbitrary bytes to the ClientHello parser. It
// must not panic; a ClientHello it accepts must parse the same from
// exactly the bytes it says it used, and need every one of them; it may
// only ask for more bytes while under the 16 KiB cap.
func FuzzClientHello(f *testing.F) {
	hellos := loadHellos(f)
	if len(hellos) == 0 {
		f.Fatal("no seed ClientHellos")
	}
	for _, b := range hellos {
		f.Add(b)
	}
	f.Add(records(helloMsg(sniExt("api.provider.test")), 3))
	f.Add(buildHello("a.test", ext{extECH, []byte{1, 2}}))
	f.Add(buildHello("", ext{extServerName, []byte{0, 4, 1, 0, 1, 'x'}}))
	f.Add([]byte{0x16, 3, 1, 0, 0})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		ch, err := parseClientHello(data)
		switch {
		case errors.Is(err, errShortHello):
			if len(data) >= maxHello {
				t.Fatalf("asked for more after %d bytes", len(data))
			}
			return
		case err != nil:
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if ch.length <= 0 || ch.length > len(data) || ch.length > maxHello {
			t.Fatalf("length %d of %d bytes", ch.length, len(data))
		}
		again, err := parseClientHello(data[:ch.length])
		if err != nil || again != ch {
			t.Fatalf("reparse of the used bytes: %+v, %v; first %+v", again, err, ch)
		}
		if _, err := parseClientHello(data[:ch.length-1]); !errors.Is(err, errShortHello) {
			t.Fatalf("one byte less: %v, want errShortHello", err)
		}
		if ch.hasSNI && ch.serverName == "" {
			t.Fatal("empty SNI accepted")
		}
		_ = checkSNI(host{name: "api.provider.test"}, ch)
	})
}

// FuzzParseRule feeds arbitrary entries to ParseRule and arbitrary hosts
// to Match and the target parser. Errors are one-line *RuleErrors; a
// rule's String parses back to the same rule; a host the proxy accepts
// as a name holds only lower-case letters, digits, '-', '_' and dots and
// is never numeric in its last label.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{
		"api.example.com", "*.example.com:8443", "10.1.2.3", "[2001:db8::1]:443", "2001:db8::1",
		"*", "*.com", "*.co.uk", "https://x", "a/b", "u@h", "h:0", "bücher.de", "0x7f.1", "2130706433",
		"127.1", "[::ffff:127.0.0.1]", "[fe80::1%25eth0]", "API.Example.COM.", "a..b", "\u212a.example.com",
	} {
		f.Add(s)
	}
	list, err := ParseAllowList([]string{"api.example.com", "*.example.org", "10.1.2.3:8080", "[2001:db8::1]"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			var re *RuleError
			if !errors.As(err, &re) || re.Entry != s || strings.ContainsAny(re.Reason, "\r\n") {
				t.Fatalf("bad error %#v", err)
			}
		} else {
			str := r.String()
			again, err := ParseRule(str)
			if err != nil || again != r || again.String() != str {
				t.Fatalf("%q -> %q -> %v, %v", s, str, again, err)
			}
			if !r.wildcard {
				port := r.port
				if port == 0 {
					port = 443
				}
				if m, ok := (AllowList{r}).Match(strings.Trim(strings.TrimSuffix(str, ":"+strconv.Itoa(r.port)), "[]"), port); !ok || m != r {
					t.Fatalf("rule %q does not match its own host", str)
				}
			}
		}

		list.Match(s, 443)
		h, _, err := parseTarget(s, 443)
		if err != nil || h.isIP() {
			return
		}
		for i := 0; i < len(h.name); i++ {
			c := h.name[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
				t.Fatalf("name %q from %q has byte %q", h.name, s, c)
			}
		}
		if isNumericLabel(h.name[strings.LastIndexByte(h.name, '.')+1:]) {
			t.Fatalf("numeric host %q taken as a name", h.name)
		}
	})
}
