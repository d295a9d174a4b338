package netpolicy

import (
	"errors"
	"fmt"
	"strconv"
)

var (
	// ErrBadRule is matched (errors.Is) by every *RuleError.
	ErrBadRule = errors.New("netpolicy: bad allow-list entry")
	// ErrBadHostMap is matched by every *HostMapError.
	ErrBadHostMap = errors.New("netpolicy: bad host mapping")

	// ErrClosed is returned by Serve when it is called after Close.
	ErrClosed = errors.New("netpolicy: proxy closed")
)

// RuleError reports an allow-list entry that ParseRule or ParseAllowList
// refused. Its message is one line, as in
//
//	netpolicy: allow-list entry 2 "*.co.uk": wildcard over the public suffix "co.uk" would allow unrelated owners' names
type RuleError struct {
	Index  int    // position in the list given to ParseAllowList; -1 from ParseRule
	Entry  string // the entry as given
	Reason string // why it was refused, lower case, no final period
}

func (e *RuleError) Error() string {
	s := "netpolicy: allow-list entry "
	if e.Index >= 0 {
		s += strconv.Itoa(e.Index) + " "
	}
	return s + strconv.Quote(e.Entry) + ": " + e.Reason
}

// Unwrap returns ErrBadRule.
func (e *RuleError) Unwrap() error { return ErrBadRule }

// HostMapError reports a host mapping entry ParseHostMap refused.
type HostMapError struct {
	Index  int    // position in the list
	Entry  string // as given
	Reason string // lower case, no final period
}

func (e *HostMapError) Error() string {
	return fmt.Sprintf("host mapping %d %q: %s", e.Index, e.Entry, e.Reason)
}

// Unwrap returns ErrBadHostMap.
func (e *HostMapError) Unwrap() error { return ErrBadHostMap }
