package netpolicy

import (
	"bytes"
	"embed"
	"errors"
	"path"
	"strings"
	"testing"
)

// Real ClientHellos captured from curl (OpenSSL 3), openssl s_client
// (TLS 1.2, and without SNI), Python's ssl module and Go's crypto/tls,
// each connecting to api.provider.test.
//
//go:embed testdata/clienthello/*.bin
var helloVectors embed.FS

func loadHellos(t testing.TB) map[string][]byte {
	t.Helper()
	ents, err := helloVectors.ReadDir("testdata/clienthello")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) == 0 {
		t.Fatal("testdata/clienthello is empty")
	}
	out := make(map[string][]byte)
	for _, e := range ents {
		b, err := helloVectors.ReadFile(path.Join("testdata/clienthello", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// ext is a TLS extension for buildHello.
type ext struct {
	typ  uint16
	data []byte
}

func u16(n int) []byte { return []byte{byte(n >> 8), byte(n)} }

// sniExt builds a server_name extension with one host_name per name.
func sniExt(names ...string) ext {
	var list []byte
	for _, n := range names {
		list = append(list, sniHostName)
		list = append(list, u16(len(n))...)
		list = append(list, n...)
	}
	return ext{extServerName, append(u16(len(list)), list...)}
}

// helloMsg builds a ClientHello handshake message with the extensions.
func helloMsg(exts ...ext) []byte {
	body := []byte{3, 3}
	body = append(body, make([]byte, 32)...)    // random
	body = append(body, 0)                      // session id
	body = append(body, 0, 4, 0x13, 1, 0x13, 2) // cipher suites
	body = append(body, 1, 0)                   // compression
	var eb []byte
	for _, e := range exts {
		eb = append(eb, u16(int(e.typ))...)
		eb = append(eb, u16(len(e.data))...)
		eb = append(eb, e.data...)
	}
	if exts != nil {
		body = append(body, u16(len(eb))...)
		body = append(body, eb...)
	}
	return append([]byte{handshakeClientHello, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
}

// records wraps a handshake message in handshake records of at most frag
// payload bytes each.
func records(msg []byte, frag int) []byte {
	var out []byte
	for len(msg) > 0 {
		n := min(frag, len(msg))
		out = append(out, recordTypeHandshake, 3, 1)
		out = append(out, u16(n)...)
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

// buildHello is a ClientHello for sni ("" for none) in one record.
func buildHello(sni string, more ...ext) []byte {
	exts := []ext{}
	if sni != "" {
		exts = append(exts, sniExt(sni))
	}
	return records(helloMsg(append(exts, more...)...), maxRecordPayload)
}

func TestClientHelloVectors(t *testing.T) {
	for name, b := range loadHellos(t) {
		t.Run(name, func(t *testing.T) {
			ch, err := parseClientHello(b)
			if err != nil {
				t.Fatal(err)
			}
			wantSNI := !strings.Contains(name, "nosni")
			if ch.hasSNI != wantSNI || (wantSNI && ch.serverName != "api.provider.test") {
				t.Errorf("SNI = %q (present %v), want api.provider.test (present %v)", ch.serverName, ch.hasSNI, wantSNI)
			}
			if ch.length != len(b) || ch.ech {
				t.Errorf("length %d ech %v, want %d false", ch.length, ch.ech, len(b))
			}
			// Every truncation asks for more bytes; none succeeds.
			for i := 0; i < len(b); i++ {
				if _, err := parseClientHello(b[:i]); err != errShortHello {
					t.Fatalf("prefix of %d bytes: %v, want errShortHello", i, err)
				}
			}
			// The same message split in 7-byte records parses the same.
			msg := b[recordHeaderLen:]
			ch2, err := parseClientHello(records(msg, 7))
			if err != nil || ch2.serverName != ch.serverName {
				t.Errorf("split in records: %q, %v", ch2.serverName, err)
			}
			// Bytes after the ClientHello's records are not its business.
			ch3, err := parseClientHello(append(bytes.Clone(b), 0x17, 3, 3, 0, 1, 0))
			if err != nil || ch3.length != len(b) {
				t.Errorf("with a record after it: length %d, %v", ch3.length, err)
			}
		})
	}
}

func TestClientHelloCrafted(t *testing.T) {
	msg := helloMsg(sniExt("api.provider.test"))
	big := helloMsg(sniExt("api.provider.test"), ext{0x15, make([]byte, 17000)}) // padding
	tests := []struct {
		name    string
		in      []byte
		sni     string
		noSNI   bool
		ech     bool
		wantErr string // "" for success, "short" for errShortHello
	}{
		{name: "one record", in: records(msg, maxRecordPayload), sni: "api.provider.test"},
		{name: "one-byte records", in: records(msg, 1), sni: "api.provider.test"},
		{name: "no extensions", in: records(helloMsg(), 100), noSNI: true},
		{name: "other extensions only", in: buildHello("", ext{10, []byte{0, 2, 0, 29}}), noSNI: true},
		{name: "ECH", in: buildHello("api.provider.test", ext{extECH, []byte{0, 1, 2}}), sni: "api.provider.test", ech: true},
		{name: "ESNI draft", in: buildHello("api.provider.test", ext{extESNI, []byte{1}}), sni: "api.provider.test", ech: true},
		{name: "other name type skipped", in: buildHello("", ext{extServerName, []byte{0, 4, 1, 0, 1, 'x'}}), wantErr: "without a host_name"},
		{name: "duplicate SNI", in: buildHello("a.test", sniExt("b.test")), wantErr: "duplicate extension"},
		{name: "two host names", in: records(helloMsg(sniExt("a.test", "b.test")), 1000), wantErr: "more than one host_name"},
		{name: "empty host name", in: records(helloMsg(sniExt("")), 1000), wantErr: "empty host_name"},
		{name: "empty SNI list", in: buildHello("", ext{extServerName, []byte{0, 0}}), wantErr: "malformed server_name"},
		{name: "SNI list too long", in: buildHello("", ext{extServerName, []byte{0, 9, 0, 0, 1, 'x'}}), wantErr: "malformed server_name"},
		{name: "alert record", in: []byte{0x15, 3, 1, 0, 2, 2, 40}, wantErr: "record type 21"},
		{name: "application data in the middle", in: append(records(msg[:10], 10), 0x17, 3, 3, 0, 1, 0), wantErr: "record type 23"},
		{name: "server hello", in: records(append([]byte{2}, msg[1:]...), 1000), wantErr: "not ClientHello"},
		{name: "zero-length record", in: []byte{0x16, 3, 1, 0, 0}, wantErr: "bad record length 0"},
		{name: "record over 2^14", in: []byte{0x16, 3, 1, 0x40, 1}, wantErr: "bad record length"},
		{name: "bad record version", in: []byte{0x16, 2, 0, 0, 4, 1, 0, 0, 0}, wantErr: "bad record version"},
		{name: "over 16 KiB", in: records(big, maxRecordPayload), wantErr: "larger than 16 KiB"},
		{name: "data after ClientHello in record", in: records(append(bytes.Clone(msg), 1, 2, 3), 1000), wantErr: "data after the ClientHello"},
		{name: "session id too long", in: records(func() []byte {
			m := bytes.Clone(msg)
			m[4+34] = 33
			return m
		}(), 1000), wantErr: "malformed ClientHello"},
		{name: "truncated body", in: records([]byte{1, 0, 0, 3, 3, 3, 0}, 100), wantErr: "malformed ClientHello"},
		{name: "extensions length mismatch", in: records(func() []byte {
			m := bytes.Clone(msg)
			m[48]++ // low byte of the extensions length
			return m
		}(), 1000), wantErr: "malformed"},
		{name: "incomplete", in: records(msg, 1000)[:30], wantErr: "short"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := parseClientHello(tt.in)
			switch {
			case tt.wantErr == "short":
				if err != errShortHello {
					t.Fatalf("err = %v, want errShortHello", err)
				}
				return
			case tt.wantErr != "":
				if err == nil || errors.Is(err, errShortHello) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if ch.serverName != tt.sni || ch.hasSNI == tt.noSNI || ch.ech != tt.ech || ch.length != len(tt.in) {
				t.Errorf("got %+v, want sni %q noSNI %v ech %v length %d", ch, tt.sni, tt.noSNI, tt.ech, len(tt.in))
			}
		})
	}
}

// A ClientHello whose records would carry it past 16 KiB is refused
// rather than waited for, even when every record is tiny.
func TestClientHelloRecordOverhead(t *testing.T) {
	msg := helloMsg(sniExt("api.provider.test"), ext{0x15, make([]byte, 3000)}) // 3 KiB message
	in := records(msg, 1)                                                       // 6 bytes per message byte: over 16 KiB
	_, err := parseClientHello(in)
	if err == nil || !strings.Contains(err.Error(), "larger than 16 KiB") {
		t.Fatalf("err = %v", err)
	}
}
