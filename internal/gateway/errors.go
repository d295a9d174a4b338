package gateway

import (
	"errors"
	"fmt"
)

// Sentinels; test with errors.Is. Each is returned wrapped with the entry or
// gateway at fault, never with the key.
var (
	// ErrSpec: a gateway spec is malformed (name, URL, repeated name).
	ErrSpec = errors.New("invalid gateway spec")
	// ErrKey: the key given to New is unusable (too short, characters that
	// cannot travel in a header or that the scrubber relies on not seeing).
	ErrKey = errors.New("invalid gateway key")
)

// MissingKeyError is returned by KeyFromEnv when the host variable that should
// hold a gateway's real key is unset or empty.
type MissingKeyError struct {
	Env     string // the host variable, e.g. OPENAI_API_KEY
	Gateway string // the gateway's name, e.g. openai
}

func (e *MissingKeyError) Error() string {
	return fmt.Sprintf("%s is not set on the host: the %s gateway needs the real key", e.Env, e.Gateway)
}
