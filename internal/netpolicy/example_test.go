package netpolicy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/proctor-sandbox/proctor/internal/netpolicy"
)

func ExampleAllowList_Match() {
	list, err := netpolicy.ParseAllowList([]string{
		"pypi.org",           // ports 80 and 443
		"*.pythonhosted.org", // names below pythonhosted.org, public addresses only
		"db.internal:5432",   // an exact name may reach a private address
		"[2001:db8::1]:8443", // an IP literal, asked for as such
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, q := range []struct {
		host string
		port int
	}{
		{"PyPI.org.", 443},
		{"pypi.org", 22},
		{"files.pythonhosted.org", 443},
		{"pythonhosted.org", 443},
		{"db.internal", 5432},
		{"2001:db8::1", 8443},
		{"2130706433", 443},
	} {
		if r, ok := list.Match(q.host, q.port); ok {
			fmt.Printf("%s port %d: allowed by %s\n", q.host, q.port, r)
		} else {
			fmt.Printf("%s port %d: refused\n", q.host, q.port)
		}
	}

	_, err = netpolicy.ParseAllowList([]string{"pypi.org", "*.co.uk"})
	fmt.Println(err)
	// Output:
	// PyPI.org. port 443: allowed by pypi.org
	// pypi.org port 22: refused
	// files.pythonhosted.org port 443: allowed by *.pythonhosted.org
	// pythonhosted.org port 443: refused
	// db.internal port 5432: allowed by db.internal:5432
	// 2001:db8::1 port 8443: allowed by [2001:db8::1]:8443
	// 2130706433 port 443: refused
	// netpolicy: allow-list entry 1 "*.co.uk": wildcard over the public suffix "co.uk" would allow unrelated owners' names
}

func ExampleProxy() {
	allow, err := netpolicy.ParseAllowList([]string{"api.provider.test"})
	if err != nil {
		fmt.Println(err)
		return
	}
	var (
		mu        sync.Mutex
		decisions []netpolicy.Decision
	)
	p, err := netpolicy.New(netpolicy.Options{
		Allow: allow,
		Record: func(d netpolicy.Decision) { // called from many goroutines
			mu.Lock()
			decisions = append(decisions, d)
			mu.Unlock()
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// In Proctor the listener lives in the agent's network namespace.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error)
	go func() { done <- p.Serve(l) }()

	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Fprint(c, "CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%s: %s", resp.Status, body)
	c.Close()

	p.Close() // waits for the Record call
	fmt.Println("Serve:", <-done)
	for _, d := range decisions {
		fmt.Printf("recorded: %s %s:%d allowed=%v reason=%q\n", d.Method, d.Host, d.Port, d.Allowed, d.Reason)
	}
	// Output:
	// 403 Forbidden: proctor proxy: not on the allow-list
	// Serve: <nil>
	// recorded: CONNECT evil.test:443 allowed=false reason="not on the allow-list"
}
