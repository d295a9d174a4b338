package testcorpus

import (
	"testing"

	"github.com/proctor-sandbox/proctor/internal/standin"
)

// Internet stands in, on the host's loopback, for the hosts a published
// Terminal-Bench 2 verifier fetches its tools from (internal/standin).
type Internet = standin.Internet

// InternetHosts are the names Internet serves.
var InternetHosts = standin.Hosts

// StartInternet starts the stand-in, its wheels made from the Python
// packages in sitePackages (a Debian root's /usr/lib/python3/dist-packages
// holding pytest); it stops when the test ends.
func StartInternet(t testing.TB, sitePackages string) *Internet {
	t.Helper()
	n, err := standin.Start(standin.Options{SitePackages: sitePackages, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}
