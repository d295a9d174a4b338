package trajectory

import "errors"

// ErrNoTurns: the recording holds no model turn (a call to a Messages,
// Responses or Chat Completions endpoint) that makes a step: there is no
// trajectory to make (ATIF wants one step at least).
var ErrNoTurns = errors.New("no model turn in the recording")
