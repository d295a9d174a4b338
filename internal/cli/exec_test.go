package cli

import (
	"fmt"
	"testing"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1", 1, true}, {"512M", 512 << 20, true}, {"2G", 2 << 30, true}, {"2g", 2 << 30, true},
		{"64KiB", 64 << 10, true}, {"1MB", 1 << 20, true}, {"3T", 3 << 40, true},
		{"", 0, false}, {"0", 0, false}, {"-1", 0, false}, {"M", 0, false}, {"1.5G", 0, false},
		{"lots", 0, false}, {"9999999999T", 0, false}, {"1 G", 0, false}, {"1X", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseSize(tc.in)
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("parseSize(%q) = %d, %v; want %d, ok=%v", tc.in, got, err, tc.want, tc.ok)
			}
		})
	}
}

// FuzzParseSize: never panics, never returns a non-positive size, and every
// size it prints back in bytes parses to itself.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"1", "512M", "2G", "64KiB", "1MB", "-1", "9999999999T", "1.5G", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSize(s)
		if err != nil {
			return
		}
		if n <= 0 {
			t.Fatalf("parseSize(%q) = %d", s, n)
		}
		back, err := parseSize(fmt.Sprint(n))
		if err != nil || back != n {
			t.Fatalf("round trip of %d: %d, %v", n, back, err)
		}
	})
}

func TestParseBinds(t *testing.T) {
	bs, err := parseBinds([]string{"/a:/b", "/c:/d:rw", "/e:/f:ro"})
	if err != nil || len(bs) != 3 || bs[0].Writable || !bs[1].Writable || bs[2].Writable {
		t.Fatalf("parseBinds = %+v, %v", bs, err)
	}
	for _, bad := range []string{"/a", "/a:/b:rx", ":/b", "/a:", "/a:/b:rw:x"} {
		if _, err := parseBinds([]string{bad}); err == nil {
			t.Errorf("parseBinds(%q) accepted", bad)
		}
	}
}
