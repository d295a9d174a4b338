package agentlayer

import (
	"errors"
	"fmt"
)

// ErrLayer is wrapped by every error about an installed layer's content.
var ErrLayer = errors.New("agent layer")

// ErrNoNPM is returned when the host has no npm to install with.
var ErrNoNPM = errors.New("npm not found on this host")

// IntegrityError is a package whose integrity is not the one the recipe
// pins: the registry served other bytes under the same version.
type IntegrityError struct {
	Package   string // name@version
	Want, Got string
}

func (e *IntegrityError) Error() string {
	return fmt.Sprintf("agent layer: %s: the registry's integrity is %s, the recipe pins %s", e.Package, e.Got, e.Want)
}

// Unwrap makes an IntegrityError an ErrLayer.
func (e *IntegrityError) Unwrap() error { return ErrLayer }
