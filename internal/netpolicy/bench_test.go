package netpolicy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
)

const benchBytes = 64 << 20

// benchServer serves one transfer per connection: after the command
// line "u\n" it reads until EOF and answers "ok"; after "d\n" it writes
// benchBytes and closes. (A tunnel's first bytes must hold a line.)
func benchServer(b *testing.B) net.Listener {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				cmd := make([]byte, 2)
				if _, err := io.ReadFull(c, cmd); err != nil {
					return
				}
				buf := make([]byte, 64<<10)
				switch cmd[0] {
				case 'u':
					if _, err := io.CopyBuffer(io.Discard, readerOnly{c}, buf); err == nil {
						c.Write([]byte("ok"))
					}
				case 'd':
					for n := 0; n < benchBytes; n += len(buf) {
						if _, err := c.Write(buf); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	b.Cleanup(func() { l.Close() })
	return l
}

// BenchmarkTunnelThroughput moves 64 MiB per operation over loopback,
// up (agent to server) and down, directly and through a CONNECT tunnel,
// so that the proxy's cost shows as the ratio of the two.
func BenchmarkTunnelThroughput(b *testing.B) {
	srv := benchServer(b)
	_, port, _ := net.SplitHostPort(srv.Addr().String())
	allow, err := ParseAllowList([]string{"bench.test:" + port})
	if err != nil {
		b.Fatal(err)
	}
	p, err := New(Options{
		Allow:  allow,
		Record: func(Decision) {},
		Resolve: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go p.Serve(pl)
	b.Cleanup(func() { p.Close() })

	direct := func() (net.Conn, io.Reader) {
		c, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		return c, c
	}
	proxied := func() (net.Conn, io.Reader) {
		c, err := net.Dial("tcp", pl.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT bench.test:%s HTTP/1.1\r\n\r\n", port)
		br := bufio.NewReaderSize(c, 64<<10)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("CONNECT: %v %v", resp, err)
		}
		return c, br
	}
	for _, path := range []struct {
		name string
		dial func() (net.Conn, io.Reader)
	}{{"direct", direct}, {"proxy", proxied}} {
		b.Run("up/"+path.name, func(b *testing.B) {
			chunk := make([]byte, 64<<10)
			b.SetBytes(benchBytes)
			for b.Loop() {
				c, r := path.dial()
				c.Write([]byte("u\n"))
				for n := 0; n < benchBytes; n += len(chunk) {
					if _, err := c.Write(chunk); err != nil {
						b.Fatal(err)
					}
				}
				c.(*net.TCPConn).CloseWrite()
				if got, _ := io.ReadAll(r); string(got) != "ok" {
					b.Fatalf("server answered %q", got)
				}
				c.Close()
			}
		})
		b.Run("down/"+path.name, func(b *testing.B) {
			buf := make([]byte, 64<<10)
			b.SetBytes(benchBytes)
			for b.Loop() {
				c, r := path.dial()
				c.Write([]byte("d\n"))
				n, err := io.CopyBuffer(io.Discard, readerOnly{r}, buf)
				if err != nil || n != benchBytes {
					b.Fatalf("read %d bytes, %v", n, err)
				}
				c.Close()
			}
		})
	}
}
