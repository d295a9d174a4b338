package hermetic_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sync"

	"github.com/proctor-sandbox/proctor/internal/hermetic"
	"github.com/proctor-sandbox/proctor/internal/netpolicy"
)

func ExampleParseHostMap() {
	m, err := hermetic.ParseHostMap([]string{"astral.sh=127.0.0.1:8443", "Deb.Debian.Org=[2001:db8::5]"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Strings())
	_, err = hermetic.ParseHostMap([]string{"astral.sh=mirror.example"})
	fmt.Println(err)
	// Output:
	// [astral.sh=127.0.0.1:8443 deb.debian.org=[2001:db8::5]]
	// host mapping 0 "astral.sh=mirror.example": address "mirror.example": not an IP address (dotted quad, or IPv6 in brackets)
}

// The learning run records what the verifier fetches; every grading run
// replays it, with the internet gone, and refuses the rest.
func Example() {
	mirror := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "Suite: stable\n")
	}))
	dir, _ := os.MkdirTemp("", "hermetic-example-")
	defer os.RemoveAll(dir)
	st, _ := hermetic.OpenStore(dir)
	allow, _ := netpolicy.ParseAllowList([]string{"deb.debian.org"})
	hm, _ := hermetic.ParseHostMap([]string{"deb.debian.org=" + mirror.Listener.Addr().String()})
	get := func(proxy, u string) {
		c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: proxy})}}
		resp, err := c.Get(u)
		if err != nil {
			fmt.Println(err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %q\n", resp.StatusCode, b)
	}
	var mu sync.Mutex
	var violations []string
	onDecision := func(d hermetic.Decision) { // the trial puts each on its timeline
		mu.Lock()
		defer mu.Unlock()
		if d.Violation {
			violations = append(violations, d.Method+" "+d.URL)
		}
	}

	rec, _ := hermetic.NewRecorder(st, hermetic.RecordOptions{Allow: allow, HostMap: hm, Record: onDecision})
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	go rec.Serve(l)
	get(l.Addr().String(), "http://deb.debian.org/debian/dists/stable/InRelease")
	rec.Close()
	r, _ := rec.Recording()
	st.Save("env-and-tests-digest", r)
	mirror.Close()

	r, _ = st.Load("env-and-tests-digest")
	ca, _ := st.CA()
	rp, _ := hermetic.NewReplayer(r, ca, hermetic.ReplayOptions{Record: onDecision})
	l, _ = net.Listen("tcp", "127.0.0.1:0")
	go rp.Serve(l)
	get(l.Addr().String(), "http://deb.debian.org/debian/dists/stable/InRelease")
	get(l.Addr().String(), "http://deb.debian.org/debian/dists/sid/InRelease")
	rp.Close() // every Decision has been reported
	fmt.Println(rp.Violations(), violations)
	// Output:
	// 200 "Suite: stable\n"
	// 200 "Suite: stable\n"
	// 403 "proctor hermetic: not in the recording: GET http://deb.debian.org/debian/dists/sid/InRelease\n"
	// 1 [GET http://deb.debian.org/debian/dists/sid/InRelease]
}
