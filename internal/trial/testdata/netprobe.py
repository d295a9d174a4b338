# The network attacker, run inside the agent sandbox by network_test.go.
# Each probe prints "NAME: RESULT" on one line; the test reads them.
import json, os, socket, ssl, sys, urllib.request

PROXY = ("127.0.0.1", 3128)
args = json.loads(sys.argv[1])
ALLOWED = args["allowed"]          # "api.provider.test:PORT", TLS, on the list
OTHER_PORT = args["other_port"]    # a host server that must get nothing
CA = "/agent/ca.pem"

def say(name, result):
    print(f"{name}: {result}", flush=True)

def connect(target):
    s = socket.create_connection(PROXY, timeout=5)
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            break
        head += b
    return s, head.split(b"\r\n", 1)[0].decode(errors="replace")

def tls_get(s, sni):
    ctx = ssl.create_default_context(cafile=CA)
    ctx.check_hostname = False  # the test server's certificate names example.com
    t = ctx.wrap_socket(s, server_hostname=sni)
    t.sendall(b"GET /secret HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    body = b""
    while True:
        b = t.recv(4096)
        if not b:
            break
        body += b
    return body.decode(errors="replace")

def probe(name, fn):
    try:
        say(name, fn())
    except Exception as e:
        say(name, f"error {type(e).__name__}: {e}")

def allowed_tls():
    s, status = connect(ALLOWED)
    if " 200" not in status:
        return status
    return "ok" if "provider-ok" in tls_get(s, ALLOWED.rsplit(":", 1)[0]) else "no body"

def sni_mismatch():
    s, status = connect(ALLOWED)
    if " 200" not in status:
        return status
    return "ok " + tls_get(s, "evil.test")[:40]

def connect_status(target):
    return lambda: connect(target)[1]

def plain_http(url):
    def f():
        h = urllib.request.ProxyHandler({"http": "http://127.0.0.1:3128"})
        try:
            return "ok " + urllib.request.build_opener(h).open(url, timeout=5).read()[:40].decode()
        except urllib.error.HTTPError as e:
            return f"HTTP {e.code}"
    return f

def direct(family, addr):
    def f():
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect(addr)
        return "connected"
    return f

def dns():
    return str(socket.getaddrinfo("example.com", 80))

def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"x", ("8.8.8.8", 53))
    return "sent"

def raw():
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.sendto(b"\x08\x00\xf7\xff\x00\x00\x00\x00", ("1.1.1.1", 0))
    return "sent"

def packet():
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    return "opened on " + str([i[1] for i in socket.if_nameindex()])

probe("allowed_tls", allowed_tls)
probe("sni_mismatch", sni_mismatch)
probe("not_listed", connect_status(f"other.test:{OTHER_PORT}"))
probe("ip_literal", connect_status(f"127.0.0.1:{OTHER_PORT}"))
probe("decimal_ip", connect_status(f"2130706433:{OTHER_PORT}"))
probe("wildcard_loopback", connect_status(f"sub.wild.test:{OTHER_PORT}"))
probe("metadata", connect_status("169.254.169.254:80"))
probe("plain_http_denied", plain_http(f"http://other.test:{OTHER_PORT}/"))
probe("direct_v4", direct(socket.AF_INET, ("127.0.0.1", OTHER_PORT)))
probe("direct_v6", direct(socket.AF_INET6, ("::1", OTHER_PORT)))
probe("direct_out", direct(socket.AF_INET, ("192.0.2.1", 80)))
probe("dns", dns)
probe("udp", udp)
probe("raw", raw)
probe("packet", packet)
