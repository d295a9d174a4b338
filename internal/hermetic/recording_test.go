package hermetic

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// sample is a recording of two bodies and a refusal, with its blob dir.
func sample(t testing.TB) (*Recording, string) {
	t.Helper()
	dir := t.TempDir()
	bodies := []string{"#!/bin/sh\necho install\n", "release bytes"}
	for _, b := range bodies {
		if err := os.WriteFile(filepath.Join(dir, BlobFile(sum(b))), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ex := []Exchange{
		{Method: "GET", URL: "https://astral.sh/uv/0.9.5/install.sh", Accept: "*/*", Status: 200,
			Header: [][2]string{{"Content-Type", "text/x-sh"}}, BodySHA256: sum(bodies[0]), BodyBytes: int64(len(bodies[0])), Count: 1},
		{Method: "GET", URL: "https://astral.sh/uv/0.9.5/uv.tar.gz", Status: 302,
			Header: [][2]string{{"Location", "https://index.example.org/files/uv.tar.gz?sig=x"}}, Count: 2},
		{Method: "GET", URL: "https://index.example.org/files/uv.tar.gz?sig=x", Status: 200, BodySHA256: sum(bodies[1]), BodyBytes: int64(len(bodies[1])), Count: 1},
		{Method: "POST", URL: "http://deb.example.org:8080/api", RequestSHA256: sum("q"), RequestBytes: 1, Status: 204, Count: 1},
		{Method: "CONNECT", URL: "other.example.net:443", Status: 403, Refused: "not on the allow-list", Count: 1},
		{Method: "GET", URL: "http://other.example.net/x", Status: 403, Refused: "not on the allow-list", Count: 3},
	}
	r, err := newRecording(ex, dir)
	if err != nil {
		t.Fatal(err)
	}
	return r, dir
}

func TestIndexRoundTrip(t *testing.T) {
	r, dir := sample(t)
	back, err := ParseIndex(r.Index())
	if err != nil {
		t.Fatal(err)
	}
	if back.Digest() != r.Digest() || !bytes.Equal(back.Index(), r.Index()) {
		t.Fatal("the index does not read back to itself")
	}
	if !slices.Equal(r.Files(), []string{IndexFile, BlobFile(sum("#!/bin/sh\necho install\n")), BlobFile(sum("release bytes"))}) &&
		!slices.Equal(r.Files(), []string{IndexFile, BlobFile(sum("release bytes")), BlobFile(sum("#!/bin/sh\necho install\n"))}) {
		t.Errorf("Files %v", r.Files())
	}
	if !slices.IsSortedFunc(r.Blobs(), func(a, b Blob) int { return strings.Compare(a.SHA256, b.SHA256) }) || len(r.Blobs()) != 2 {
		t.Errorf("Blobs %v", r.Blobs())
	}
	// The order given does not matter: the index is sorted, so canonical.
	ex := r.Exchanges()
	slices.Reverse(ex)
	again, err := newRecording(ex, dir)
	if err != nil || again.Digest() != r.Digest() {
		t.Errorf("same exchanges in another order: %v, digest %s want %s", err, again.Digest(), r.Digest())
	}
	// Export and LoadDir: the same recording, the digest checked.
	out := t.TempDir()
	if err := r.Export(out); err != nil {
		t.Fatal(err)
	}
	names, _ := os.ReadDir(out)
	var got []string
	for _, n := range names {
		got = append(got, n.Name())
	}
	want := r.Files()
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("exported %v, Files %v", got, want)
	}
	l, err := LoadDir(out, r.Digest())
	if err != nil || l.Digest() != r.Digest() {
		t.Fatalf("LoadDir: %v", err)
	}
	if _, err := LoadDir(out, "sha256:"+strings.Repeat("0", 64)); !errors.Is(err, ErrTampered) {
		t.Errorf("LoadDir with another digest: %v", err)
	}
}

// TestIndexVectors: indexes that are not as written are refused, each
// with the field at fault.
func TestIndexVectors(t *testing.T) {
	r, dir := sample(t)
	good := string(r.Index())
	tests := []struct {
		name, from, to string
		field          string
		want           error
	}{
		{"not JSON", good, "{", "", ErrMalformed},
		{"another schema", `"proctor.hermetic/v1"`, `"proctor.hermetic/v2"`, "schema", ErrMalformed},
		{"unknown field", `"schema":`, `"extra":1,"schema":`, "", ErrMalformed},
		{"spaces", `"schema":`, `"schema": `, "", ErrMalformed},
		{"a bad method", `"method":"POST"`, `"method":"PO ST"`, "method", ErrMalformed},
		{"a relative URL", `"url":"http://deb.example.org:8080/api"`, `"url":"/api"`, "url", ErrMalformed},
		{"a default port written", `"url":"http://other.example.net/x"`, `"url":"http://other.example.net:80/x"`, "url", ErrMalformed},
		{"an upper-case host", `"url":"http://other.example.net/x"`, `"url":"http://Other.example.net/x"`, "url", ErrMalformed},
		{"a numeric host", `"url":"http://other.example.net/x"`, `"url":"http://2130706433/x"`, "url", ErrMalformed},
		{"a fragment", `"url":"http://other.example.net/x"`, `"url":"http://other.example.net/x#y"`, "url", ErrMalformed},
		{"a CONNECT answered", `"method":"CONNECT","refused":"not on the allow-list"`, `"method":"CONNECT"`, "url", ErrMalformed},
		{"a short digest", sum("release bytes"), "abc", "body_sha256", ErrMalformed},
		{"a body size off (found with the body)", `"body_bytes":13`, `"body_bytes":12`, "", ErrTampered},
		{"a status out of range", `"status":302`, `"status":99`, "status", ErrMalformed},
		{"a body for 204", `"request_sha256":"` + sum("q"), `"body_bytes":1,"body_sha256":"` + sum("q") + `","request_sha256":"` + sum("q"), "", ErrMalformed},
		{"a header not kept", `"Content-Type"`, `"Set-Cookie"`, "header", ErrMalformed},
		{"a header with a line break", `"text/x-sh"`, `"text/x-sh\r\nX: y"`, "header", ErrMalformed},
		{"no count", `"count":2,`, `"count":0,`, "count", ErrMalformed},
		{"a refusal with a body", `"body_bytes":0,"body_sha256":"","count":3,`, `"body_bytes":1,"body_sha256":"` + sum("x") + `","count":3,`, "", ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(good, tt.from) {
				t.Fatalf("the sample has no %q", tt.from)
			}
			bad := strings.Replace(good, tt.from, tt.to, 1)
			_, err := Load([]byte(bad), dir)
			if tt.want == ErrTampered {
				var be *BlobError
				if !errors.Is(err, tt.want) || !errors.As(err, &be) {
					t.Fatalf("Load: %v, want a *BlobError wrapping %v", err, tt.want)
				}
				return
			}
			var ie *IndexError
			if !errors.Is(err, tt.want) || !errors.As(err, &ie) {
				t.Fatalf("Load: %v, want %v", err, tt.want)
			}
			if tt.field != "" && ie.Field != tt.field {
				t.Errorf("field %q, want %q (%v)", ie.Field, tt.field, err)
			}
		})
	}
	// Two exchanges out of order, or the same request twice.
	ex := r.Exchanges()
	ex = append(ex, ex[0])
	raw, _ := encodeIndex(ex)
	if _, err := ParseIndex(raw); !errors.Is(err, ErrMalformed) {
		t.Errorf("the same request twice: %v", err)
	}
}

// TestTamperedBodies: a body that is not what the index names is a
// *BlobError wrapping ErrTampered (or ErrMissingBlob), however it is
// wrong, through every API that reads bodies.
func TestTamperedBodies(t *testing.T) {
	body := "release bytes"
	tests := []struct {
		name   string
		damage func(t *testing.T, file string)
		want   error
	}{
		{"one byte changed", func(t *testing.T, f string) { os.WriteFile(f, []byte("release bytez"), 0o644) }, ErrTampered},
		{"cut short", func(t *testing.T, f string) { os.WriteFile(f, []byte("release"), 0o644) }, ErrTampered},
		{"grown", func(t *testing.T, f string) { os.WriteFile(f, []byte(body+"!"), 0o644) }, ErrTampered},
		{"missing", func(t *testing.T, f string) { os.Remove(f) }, ErrMissingBlob},
		{"a symbolic link to the right bytes", func(t *testing.T, f string) {
			other := filepath.Join(t.TempDir(), "x")
			os.WriteFile(other, []byte(body), 0o644)
			os.Remove(f)
			if err := os.Symlink(other, f); err != nil {
				t.Fatal(err)
			}
		}, ErrTampered},
		{"a directory", func(t *testing.T, f string) { os.Remove(f); os.Mkdir(f, 0o755) }, ErrTampered},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, dir := sample(t)
			out := t.TempDir()
			if err := r.Export(out); err != nil {
				t.Fatal(err)
			}
			tt.damage(t, filepath.Join(dir, BlobFile(sum(body))))
			tt.damage(t, filepath.Join(out, BlobFile(sum(body))))
			check := func(api string, err error) {
				var be *BlobError
				if !errors.Is(err, tt.want) || !errors.As(err, &be) || be.SHA256 != sum(body) {
					t.Errorf("%s: %v, want a *BlobError wrapping %v", api, err, tt.want)
				}
			}
			_, err := Load(r.Index(), dir)
			check("Load", err)
			_, err = LoadDir(out, "")
			check("LoadDir", err)
			check("Export", r.Export(t.TempDir()))
			st := openStore(t)
			check("Store.Save", st.Save("k", r))
		})
	}
}

// TestStoreKeys: keys name files: only plain names are taken.
func TestStoreKeys(t *testing.T) {
	st := openStore(t)
	r, _ := sample(t)
	for _, k := range []string{"", ".hidden", "../x", "a/b", "x y", strings.Repeat("k", 129)} {
		if err := st.Save(k, r); !errors.Is(err, ErrBadKey) {
			t.Errorf("Save(%q): %v", k, err)
		}
		if _, err := st.Load(k); !errors.Is(err, ErrBadKey) {
			t.Errorf("Load(%q): %v", k, err)
		}
	}
	if _, err := st.Load("absent"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of no recording: %v", err)
	}
	if err := st.Save("env.tests-1", r); err != nil {
		t.Fatal(err)
	}
	l, err := st.Load("env.tests-1")
	if err != nil || l.Digest() != r.Digest() {
		t.Fatalf("Load: %v", err)
	}
	// A damaged index in the store is refused, not replayed.
	name := filepath.Join(st.Dir(), recordingsDir, "env.tests-1.json")
	b, _ := os.ReadFile(name)
	os.WriteFile(name, bytes.Replace(b, []byte(`"count":1`), []byte(`"count":7`), 1), 0o644)
	if l, err := st.Load("env.tests-1"); err == nil && l.Digest() == r.Digest() {
		t.Error("an edited index loaded with the old digest")
	}
}

// FuzzParseIndex: whatever ParseIndex accepts it writes back byte for
// byte, with the same digest.
func FuzzParseIndex(f *testing.F) {
	r, _ := sample(f)
	f.Add(r.Index())
	empty, _ := newRecording(nil, "")
	f.Add(empty.Index())
	f.Add([]byte(`{"exchanges":[],"schema":"proctor.hermetic/v1"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseIndex(b)
		if err != nil {
			var ie *IndexError
			if !errors.As(err, &ie) {
				t.Fatalf("not an *IndexError: %v", err)
			}
			return
		}
		if !bytes.Equal(r.Index(), b) {
			t.Fatal("accepted an index it does not write")
		}
		again, err := newRecording(r.Exchanges(), "")
		if err != nil || again.Digest() != r.Digest() {
			t.Fatalf("re-encoding: %v", err)
		}
	})
}
