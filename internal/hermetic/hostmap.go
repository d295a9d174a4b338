package hermetic

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"

	"github.com/proctor-sandbox/proctor/internal/netpolicy"
)

// HostMap sends the connections for a host name to another address, as
// curl's --resolve does (netpolicy.HostMap).
type HostMap = netpolicy.HostMap

// ParseHostMap parses entries of the form NAME=ADDR[:PORT]
// (netpolicy.ParseHostMap).
func ParseHostMap(entries []string) (HostMap, error) { return netpolicy.ParseHostMap(entries) }

// ReadRoots reads the certificates of PEM files (--ca-file), for
// RecordOptions.Roots. Each file must hold at least one certificate and
// nothing that fails to parse.
func ReadRoots(files ...string) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("hermetic: reading CA file: %w", err)
		}
		n := 0
		for rest := b; ; {
			var blk *pem.Block
			if blk, rest = pem.Decode(rest); blk == nil {
				break
			}
			if blk.Type != "CERTIFICATE" {
				continue
			}
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("hermetic: CA file %s: certificate %d: %w", name, n+1, err)
			}
			out = append(out, c)
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("hermetic: CA file %s: no PEM certificate in it", name)
		}
	}
	return out, nil
}
