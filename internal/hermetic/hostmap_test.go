package hermetic

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestParseHostMap(t *testing.T) {
	tests := []struct {
		entry string
		name  string
		want  string // netip.AddrPort; "" for an error
	}{
		{"astral.sh=127.0.0.1:8443", "astral.sh", "127.0.0.1:8443"},
		{"Files.PythonHosted.org.=10.0.0.5", "files.pythonhosted.org", "10.0.0.5:0"},
		{"mirror.example=[2001:db8::1]:3128", "mirror.example", "[2001:db8::1]:3128"},
		{"mirror.example=[::1]", "mirror.example", "[::1]:0"},
		{" deb.debian.org=192.0.2.1:80 ", "deb.debian.org", "192.0.2.1:80"},
		{"astral.sh", "", ""},
		{"astral.sh=", "", ""},
		{"=127.0.0.1", "", ""},
		{"127.0.0.1=10.0.0.1", "", ""},
		{"astral.sh=mirror.example", "", ""},
		{"astral.sh=127.1", "", ""},
		{"astral.sh=127.0.0.1:", "", ""},
		{"astral.sh=127.0.0.1:0", "", ""},
		{"astral.sh=127.0.0.1:65536", "", ""},
		{"astral.sh=127.0.0.1:08", "", ""},
		{"astral.sh=::1", "", ""},
		{"astral.sh=[::1]x", "", ""},
		{"astral.sh=[fe80::1%eth0]", "", ""},
		{"bad host=127.0.0.1", "", ""},
		{"*.example.org=127.0.0.1", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.entry, func(t *testing.T) {
			m, err := ParseHostMap([]string{tt.entry})
			if tt.want == "" {
				var he *HostMapError
				if !errors.Is(err, ErrBadHostMap) || !errors.As(err, &he) || he.Entry != tt.entry {
					t.Fatalf("ParseHostMap(%q) = %v, %v; want a *HostMapError", tt.entry, m, err)
				}
				return
			}
			if err != nil || m[tt.name] != netip.MustParseAddrPort(tt.want) || len(m) != 1 {
				t.Fatalf("ParseHostMap(%q) = %v, %v; want %s=%s", tt.entry, m, err, tt.name, tt.want)
			}
			back, err := ParseHostMap(m.Strings())
			if err != nil || !slices.Equal(back.Strings(), m.Strings()) {
				t.Errorf("Strings %v does not read back: %v", m.Strings(), err)
			}
		})
	}
	if _, err := ParseHostMap([]string{"a.example=127.0.0.1", "A.example=127.0.0.2"}); !errors.Is(err, ErrBadHostMap) {
		t.Errorf("a name mapped twice: %v", err)
	}
}

func TestReadRoots(t *testing.T) {
	dir := t.TempDir()
	u := newUpstreamCA(t)
	good := filepath.Join(dir, "ca.pem")
	os.WriteFile(good, append([]byte("# a comment\n"), u.pem...), 0o644)
	empty := filepath.Join(dir, "empty.pem")
	os.WriteFile(empty, []byte("no certificate here\n"), 0o644)
	broken := filepath.Join(dir, "broken.pem")
	os.WriteFile(broken, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), 0o644)
	if cs, err := ReadRoots(good); err != nil || len(cs) != 1 || !cs[0].Equal(u.cert) {
		t.Errorf("ReadRoots(good) = %d, %v", len(cs), err)
	}
	for _, f := range []string{empty, broken, filepath.Join(dir, "absent.pem")} {
		if _, err := ReadRoots(good, f); err == nil {
			t.Errorf("ReadRoots(%s): no error", filepath.Base(f))
		}
	}
}
