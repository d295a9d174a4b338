package bundle

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The first word of each key file.
const (
	PrivateKeyPrefix = "proctor-ed25519-private-v1"
	PublicKeyPrefix  = "proctor-ed25519-public-v1"
)

// maxKeyFile bounds how much of a key file is read.
const maxKeyFile = 4096

// GenerateKey returns a new ed25519 private key from crypto/rand.
func GenerateKey() (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating a key: %w", err)
	}
	return priv, nil
}

// WriteKeyFiles writes priv to path (mode 0600) and its public key to
// path+".pub" (mode 0644), each as one line:
//
//	proctor-ed25519-private-v1 <standard base64 of the 32-byte seed>
//	proctor-ed25519-public-v1 <standard base64 of the 32-byte key>
//
// It refuses to overwrite either file (or to write through a symbolic
// link); if it cannot write the public key it removes the private key it
// has just written.
func WriteKeyFiles(path string, priv ed25519.PrivateKey) error {
	if err := checkPrivateKey(priv); err != nil {
		return fmt.Errorf("%s: %w", quotePath(path), err)
	}
	pubPath := path + ".pub"
	for _, p := range []string{path, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s: %w: refusing to overwrite a key file", quotePath(p), fs.ErrExist)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w", quotePath(p), err)
		}
	}
	privLine := PrivateKeyPrefix + " " + base64.StdEncoding.EncodeToString(priv.Seed()) + "\n"
	if err := writeNew(path, []byte(privLine), 0o600); err != nil {
		return err
	}
	pub := priv.Public().(ed25519.PublicKey)
	if err := writeNew(pubPath, MarshalPublicKey(pub, ""), 0o644); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// MarshalPublicKey returns the public key file for pub, with an optional
// comment (one line of printable text) after the key.
func MarshalPublicKey(pub ed25519.PublicKey, comment string) []byte {
	line := PublicKeyPrefix + " " + base64.StdEncoding.EncodeToString(pub)
	if comment = strings.TrimSpace(comment); comment != "" && printableLine(comment) {
		line += " " + comment
	}
	return []byte(line + "\n")
}

// writeNew creates path exclusively with mode perm (whatever the umask),
// writes data and syncs it; on failure it removes what it created.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w: refusing to overwrite a key file", quotePath(path), fs.ErrExist)
		}
		return fmt.Errorf("writing a key file: %w", err)
	}
	err = f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("%s: writing the key: %w", quotePath(path), err)
	}
	return nil
}

// ReadPrivateKey reads a private key file written by WriteKeyFiles. It
// refuses a file that its group or others may read or write (except on
// Windows, whose files have no such bits), a file that is not regular, and
// anything but the one documented line. Every error is one line that names
// the file.
func ReadPrivateKey(path string) (ed25519.PrivateKey, error) {
	data, mode, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	if runtime.GOOS != "windows" && mode.Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s: %w (mode %04o): run chmod 600 on it", quotePath(path), ErrKeyPermissions, mode.Perm())
	}
	seed, _, err := parseKeyLine(data, PrivateKeyPrefix, PublicKeyPrefix, false)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", quotePath(path), err)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// ParsePublicKey parses the content of a public key file (see
// ReadPublicKey).
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	key, _, err := parseKeyLine(data, PublicKeyPrefix, PrivateKeyPrefix, true)
	if err != nil {
		return nil, err
	}
	return ed25519.PublicKey(key), nil
}

// ReadPublicKey reads a public key file: one line, the prefix, the key in
// base64 and an optional comment. Every error is one line that names the
// file.
func ReadPublicKey(path string) (ed25519.PublicKey, error) {
	data, _, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	key, _, err := parseKeyLine(data, PublicKeyPrefix, PrivateKeyPrefix, true)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", quotePath(path), err)
	}
	return ed25519.PublicKey(key), nil
}

// readKeyFile reads at most maxKeyFile bytes of a regular file.
func readKeyFile(path string) ([]byte, os.FileMode, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, 0, fmt.Errorf("%s: reading the key: %w", quotePath(path), err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: reading the key: %w", quotePath(path), err)
	}
	if !st.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s: %w: not a regular file", quotePath(path), ErrKeyFormat)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, 0, fmt.Errorf("%s: reading the key: %w", quotePath(path), err)
	}
	if len(data) > maxKeyFile {
		return nil, 0, fmt.Errorf("%s: %w: larger than %d bytes", quotePath(path), ErrKeyFormat, maxKeyFile)
	}
	return data, st.Mode(), nil
}

// parseKeyLine reads "PREFIX BASE64[ COMMENT]" with an optional final
// newline and returns the 32 key bytes and the comment.
func parseKeyLine(data []byte, prefix, otherPrefix string, comment bool) ([]byte, string, error) {
	kind := "private"
	if comment {
		kind = "public"
	}
	want := fmt.Sprintf("want one line %q followed by a space and the base64 key", prefix)
	if comment {
		want += " and an optional comment"
	}
	if len(data) == 0 {
		return nil, "", fmt.Errorf("%w: empty file; %s", ErrKeyFormat, want)
	}
	line, _ := bytes.CutSuffix(data, []byte("\n"))
	switch {
	case bytes.ContainsAny(line, "\r"):
		return nil, "", fmt.Errorf("%w: carriage return in the file; %s", ErrKeyFormat, want)
	case bytes.Contains(line, []byte("\n")):
		return nil, "", fmt.Errorf("%w: more than one line; %s", ErrKeyFormat, want)
	case !utf8.Valid(line):
		return nil, "", fmt.Errorf("%w: not UTF-8 text; %s", ErrKeyFormat, want)
	}
	s := string(line)
	first, rest, _ := strings.Cut(s, " ")
	switch {
	case first == otherPrefix:
		other := "public"
		if comment {
			other = "private"
		}
		return nil, "", fmt.Errorf("%w: this is a %s key file, not a %s one", ErrKeyFormat, other, kind)
	case first != prefix:
		// Never echo what the file holds: it may be a secret (a raw seed
		// passed as --pubkey, a token).
		return nil, "", fmt.Errorf("%w: does not start with %q; %s", ErrKeyFormat, prefix, want)
	}
	b64, note, hasNote := strings.Cut(rest, " ")
	switch {
	case hasNote && !comment:
		return nil, "", fmt.Errorf("%w: text after the key; %s", ErrKeyFormat, want)
	case hasNote && (note == "" || !printableLine(note)):
		return nil, "", fmt.Errorf("%w: the comment after the key is empty or has control characters", ErrKeyFormat)
	}
	key, msg := base64Key(b64, 32)
	if msg != "" {
		if !comment {
			// Never echo what may be secret.
			return nil, "", fmt.Errorf("%w: bad seed: want 44 characters of padded standard base64 encoding 32 bytes", ErrKeyFormat)
		}
		return nil, "", fmt.Errorf("%w: bad key: %s", ErrKeyFormat, msg)
	}
	return key, note, nil
}

// printableLine reports whether s has no control characters.
func printableLine(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r == '\u2028' || r == '\u2029' || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// quotePath renders a path for a one-line message: as is when it is plain,
// quoted when it has spaces or control characters.
func quotePath(p string) string {
	if p != "" && printableLine(p) && !strings.ContainsAny(p, " \"") {
		return p
	}
	return strconv.Quote(p)
}
