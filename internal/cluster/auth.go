package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
)

// ClientAuth names the files a client authenticates with and verifies the
// server by, as NATS users keep them. Every field is a path and optional;
// a user and password or a token go in the URL instead
// ("nats://user:pass@host:4222", "nats://token@host:4222"). It is a plain
// value, safe to copy.
type ClientAuth struct {
	// Creds is a credentials file: a user JWT and its NKey seed
	// (nats.UserCredentials). Not with NKey.
	Creds string
	// NKey is a file holding a user NKey seed (nats.NkeyOptionFromSeed).
	// Not with Creds.
	NKey string
	// CA is a PEM bundle of the certificate authorities the server's
	// certificate must chain to (nats.RootCAs). Setting it requires TLS.
	CA string
	// Cert and Key are a PEM client certificate and its private key for
	// mutual TLS (nats.ClientCert): both or neither. Setting them requires TLS.
	Cert, Key string
}

// AuthFileError reports a file of a [ClientAuth] that cannot be used.
type AuthFileError struct {
	Field string // "Creds", "NKey", "CA", "Cert" or "Key"
	Path  string
	Err   error
}

func (e *AuthFileError) Error() string {
	return fmt.Sprintf("%s file %s: %v", e.Field, e.Path, e.Err)
}

// Unwrap returns the underlying error.
func (e *AuthFileError) Unwrap() error { return e.Err }

// Check reports the first problem with a: Creds and NKey together, Cert
// without Key or Key without Cert, or a file that is missing, not a
// regular file or not readable (as an [*AuthFileError]).
func (a ClientAuth) Check() error {
	if a.Creds != "" && a.NKey != "" {
		return errors.New("client auth: a credentials file and an nkey seed file are exclusive")
	}
	if (a.Cert == "") != (a.Key == "") {
		return errors.New("client auth: a client certificate needs its key, and a key its certificate")
	}
	for _, f := range []struct{ field, path string }{
		{"Creds", a.Creds}, {"NKey", a.NKey}, {"CA", a.CA}, {"Cert", a.Cert}, {"Key", a.Key},
	} {
		if f.path == "" {
			continue
		}
		if err := checkFile(f.path); err != nil {
			return &AuthFileError{Field: f.field, Path: f.path, Err: err}
		}
	}
	return nil
}

// checkFile reports whether path is a regular file this process can read.
func checkFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return pe.Err
		}
		return err
	}
	if fi.IsDir() {
		return errors.New("is a directory")
	}
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return pe.Err
		}
		return err
	}
	return f.Close()
}

// Options checks a (see [ClientAuth.Check]), parses the CA bundle and the
// client certificate and key, and returns the nats.Connect options a
// stands for, to pass to [Connect] with [WithNATS]. The zero
// ClientAuth gives none.
func (a ClientAuth) Options() ([]nats.Option, error) {
	if err := a.Check(); err != nil {
		return nil, err
	}
	var opts []nats.Option
	switch {
	case a.Creds != "":
		opts = append(opts, nats.UserCredentials(a.Creds))
	case a.NKey != "":
		o, err := nats.NkeyOptionFromSeed(a.NKey)
		if err != nil {
			return nil, &AuthFileError{Field: "NKey", Path: a.NKey, Err: trimNATS(err)}
		}
		opts = append(opts, o)
	}
	if a.CA != "" {
		// nats.RootCAs would say the same later, without naming the field.
		pem, err := os.ReadFile(a.CA)
		if err != nil {
			return nil, &AuthFileError{Field: "CA", Path: a.CA, Err: err}
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return nil, &AuthFileError{Field: "CA", Path: a.CA, Err: errors.New("no PEM certificate in it")}
		}
		opts = append(opts, nats.RootCAs(a.CA))
	}
	if a.Cert != "" {
		if _, err := tls.LoadX509KeyPair(a.Cert, a.Key); err != nil {
			return nil, &AuthFileError{Field: "Cert", Path: a.Cert, Err: fmt.Errorf("with key %s: %w", a.Key, err)}
		}
		opts = append(opts, nats.ClientCert(a.Cert, a.Key))
	}
	return opts, nil
}

// trimNATS drops nats.go's "nats: " prefix from a message we wrap anyway.
func trimNATS(err error) error {
	if s, ok := strings.CutPrefix(err.Error(), "nats: "); ok {
		return errors.New(s)
	}
	return err
}

// redactURL returns the server URL (or comma-separated URLs) s with any
// password or token replaced by "xxxxx", for error messages: a user name
// stays, as in "nats://alice:xxxxx@host:4222"; a token, the user info
// without a colon, goes entirely, as in "nats://xxxxx@host:4222".
// RedactURL returns the cluster URL s (or comma-separated URLs) with any
// password or token replaced, for messages.
func RedactURL(s string) string { return redactURL(s) }

func redactURL(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = redactOne(p)
	}
	return strings.Join(parts, ",")
}

func redactOne(s string) string {
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return s
	}
	start := 0
	if i := strings.Index(s, "://"); i >= 0 && i < at {
		start = i + len("://")
	}
	if colon := strings.Index(s[start:at], ":"); colon >= 0 {
		return s[:start+colon] + ":xxxxx@" + s[at+1:]
	}
	return s[:start] + "xxxxx@" + s[at+1:]
}

// secrets returns the passwords and tokens in the URL(s) s.
func secrets(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		at := strings.LastIndex(p, "@")
		if at < 0 {
			continue
		}
		start := 0
		if i := strings.Index(p, "://"); i >= 0 && i < at {
			start = i + len("://")
		}
		info := p[start:at]
		if colon := strings.Index(info, ":"); colon >= 0 {
			info = info[colon+1:]
		}
		if info != "" {
			out = append(out, info)
		}
	}
	return out
}

// redactErr returns err, or, if its message holds a password or token of
// the URL(s) s (as a url.Error from parsing the URL does), an error whose
// message has them replaced by "xxxxx" and which still unwraps to err.
// Whole URLs are redacted first, as [redactURL] does, so that a short
// secret is not hunted for in the rest of the message unless it is left.
func redactErr(err error, s string) error {
	msg := err.Error()
	for _, p := range strings.Split(s, ",") {
		if r := redactOne(p); r != p {
			msg = strings.ReplaceAll(msg, p, r)
		}
	}
	for _, sec := range secrets(s) {
		msg = strings.ReplaceAll(msg, sec, "xxxxx")
	}
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
