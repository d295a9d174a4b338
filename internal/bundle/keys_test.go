package bundle

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestKeyFiles(t *testing.T) {
	priv, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "proctor.key")
	if err := WriteKeyFiles(path, priv); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPrivateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(priv) {
		t.Error("private key differs after a round trip")
	}
	pub, err := ReadPublicKey(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(priv.Public()) {
		t.Error("public key differs after a round trip")
	}
	if runtime.GOOS != "windows" {
		for p, want := range map[string]fs.FileMode{path: 0o600, path + ".pub": 0o644} {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != want {
				t.Errorf("%s: mode %v, want %v", p, st.Mode().Perm(), want)
			}
		}
	}
	data, _ := os.ReadFile(path)
	want := PrivateKeyPrefix + " " + base64.StdEncoding.EncodeToString(priv.Seed()) + "\n"
	if string(data) != want {
		t.Errorf("private key file %q", data)
	}

	// Refuses to overwrite either file, and then writes nothing.
	before, _ := os.ReadFile(path)
	other, _ := GenerateKey()
	err = WriteKeyFiles(path, other)
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), path) {
		t.Errorf("overwrite: %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("the private key was overwritten")
	}
	lone := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(lone+".pub", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteKeyFiles(lone, other); !errors.Is(err, fs.ErrExist) {
		t.Errorf("existing .pub: %v", err)
	}
	if _, err := os.Lstat(lone); !errors.Is(err, fs.ErrNotExist) {
		t.Error("a private key was left beside a .pub that was not overwritten")
	}
	// A dangling symbolic link is not written through.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(filepath.Join(t.TempDir(), "target"), link); err == nil {
		if err := WriteKeyFiles(link, other); err == nil {
			t.Error("wrote a key through a symbolic link")
		}
	}
	if err := WriteKeyFiles(filepath.Join(t.TempDir(), "short"), priv[:31]); err == nil {
		t.Error("wrote a short key")
	}
}

func TestPrivateKeyPermissions(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows files have no group or other permission bits")
	}
	priv, _ := GenerateKey()
	path := filepath.Join(t.TempDir(), "key")
	if err := WriteKeyFiles(path, priv); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []fs.FileMode{0o644, 0o640, 0o604, 0o620, 0o602, 0o660, 0o700 | 0o007} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := ReadPrivateKey(path)
		if !errors.Is(err, ErrKeyPermissions) {
			t.Errorf("mode %04o: %v", mode, err)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, path+": ") || strings.Contains(msg, "\n") || !strings.Contains(msg, "chmod 600") {
			t.Errorf("mode %04o: message %q", mode, msg)
		}
	}
	for _, mode := range []fs.FileMode{0o600, 0o400} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadPrivateKey(path); err != nil {
			t.Errorf("mode %04o: %v", mode, err)
		}
	}
}

func TestMalformedKeyFiles(t *testing.T) {
	priv := signerKey
	seed := base64.StdEncoding.EncodeToString(priv.Seed())
	pub := base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))
	short := base64.StdEncoding.EncodeToString(make([]byte, 31))
	long := base64.StdEncoding.EncodeToString(make([]byte, 33))
	cases := []struct {
		name, content string
		private       bool
	}{
		{"empty", "", true},
		{"empty pub", "", false},
		{"only newline", "\n", true},
		{"no prefix", seed + "\n", true},
		{"wrong prefix", "proctor-ed25519-private-v2 " + seed + "\n", true},
		{"public given as private", PublicKeyPrefix + " " + pub + "\n", true},
		{"private given as public", PrivateKeyPrefix + " " + seed + "\n", false},
		{"two lines", PrivateKeyPrefix + " " + seed + "\n" + PrivateKeyPrefix + " " + seed + "\n", true},
		{"two lines pub", PublicKeyPrefix + " " + pub + "\n\n", false},
		{"crlf", PrivateKeyPrefix + " " + seed + "\r\n", true},
		{"two spaces", PrivateKeyPrefix + "  " + seed + "\n", true},
		{"tab", PrivateKeyPrefix + "\t" + seed + "\n", true},
		{"trailing space", PrivateKeyPrefix + " " + seed + " \n", true},
		{"comment on private", PrivateKeyPrefix + " " + seed + " me@host\n", true},
		{"unpadded", PrivateKeyPrefix + " " + strings.TrimRight(seed, "=") + "\n", true},
		{"url base64", PublicKeyPrefix + " " + strings.NewReplacer("+", "-", "/", "_").Replace(pub) + "x\n", false},
		{"short seed", PrivateKeyPrefix + " " + short + "\n", true},
		{"long key", PublicKeyPrefix + " " + long + "\n", false},
		{"newline in base64", PublicKeyPrefix + " " + pub[:20] + "\n" + pub[20:] + "\n", false},
		{"control in comment", PublicKeyPrefix + " " + pub + " a\x1bb\n", false},
		{"empty comment", PublicKeyPrefix + " " + pub + " \n", false},
		{"not utf8", PublicKeyPrefix + " " + pub + " \xff\n", false},
		{"openssh", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGk me@host\n", false},
		{"pem", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n", true},
		{"huge", PublicKeyPrefix + " " + pub + " " + strings.Repeat("a", 5000) + "\n", false},
	}
	dir := t.TempDir()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			var err error
			if tc.private {
				_, err = ReadPrivateKey(path)
			} else {
				_, err = ReadPublicKey(path)
			}
			checkKeyError(t, err, path)
			if tc.private && strings.Contains(err.Error(), seed[:12]) {
				t.Errorf("the error shows the private key: %v", err)
			}
		})
	}
	// A directory, and a file that is not there.
	checkKeyError(t, func() error { _, err := ReadPublicKey(dir); return err }(), dir)
	if _, err := ReadPrivateKey(filepath.Join(dir, "absent")); err == nil || !strings.HasPrefix(err.Error(), filepath.Join(dir, "absent")+": ") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("absent file: %v", err)
	}

	// Accepted forms: no final newline, a comment.
	for _, content := range []string{PublicKeyPrefix + " " + pub, PublicKeyPrefix + " " + pub + " made by me — on host ✓\n"} {
		path := filepath.Join(dir, "ok.pub")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if k, err := ReadPublicKey(path); err != nil || !k.Equal(priv.Public()) {
			t.Errorf("%q: %v", content, err)
		}
	}
}

func checkKeyError(t *testing.T, err error, path string) {
	t.Helper()
	if err == nil {
		t.Fatal("accepted")
	}
	if !errors.Is(err, ErrKeyFormat) {
		t.Errorf("%v: not ErrKeyFormat", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, path+": ") || strings.ContainsAny(msg, "\n\r") {
		t.Errorf("message %q: not one line naming the file", msg)
	}
}

func TestFingerprint(t *testing.T) {
	pub := signerKey.Public().(ed25519.PublicKey)
	fp := Fingerprint(pub)
	if checkFingerprint(fp) != "" || fp != "SHA256:PaKgoX96NuUf2ggTBSEV9us2URMemXyYOjGt4tArbOY" {
		t.Errorf("fingerprint %s", fp)
	}
}
