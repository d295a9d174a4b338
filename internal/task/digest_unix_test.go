//go:build unix

package task

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestDigestSpecialFiles(t *testing.T) {
	tests := []struct {
		name string
		make func(t *testing.T, p string)
		kind string
	}{
		{"fifo", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "fifo"},
		{"socket", func(t *testing.T, p string) {
			l, err := net.Listen("unix", p)
			if err != nil {
				t.Skipf("unix sockets unavailable: %v", err)
			}
			t.Cleanup(func() { l.Close() })
		}, "socket"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			sampleTree(t, dir)
			p := filepath.Join(dir, "environment", "empty", "special")
			tt.make(t, p)
			_, err := Digest(dir)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrSpecialFile) {
				t.Fatalf("Digest = %v, want an *Error matching ErrSpecialFile", err)
			}
			if e.File != p {
				t.Errorf("File = %q, want %q", e.File, p)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.kind) || strings.Contains(msg, "\n") {
				t.Errorf("message %q does not name %s on one line", msg, tt.kind)
			}
		})
	}
}

// A file that cannot be read fails the digest rather than being skipped.
func TestDigestUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("skipping: root reads files whatever their mode")
	}
	dir := t.TempDir()
	sampleTree(t, dir)
	p := filepath.Join(dir, "instruction.md")
	if err := os.Chmod(p, 0); err != nil {
		t.Fatal(err)
	}
	_, err := Digest(dir)
	var e *Error
	if !errors.As(err, &e) || e.File != p {
		t.Fatalf("Digest = %v, want an *Error naming %s", err, p)
	}
}
