# The loopback clients, run inside the agent sandbox by loopback_test.go.
# argv[1] is a JSON list of [client, url]; each fetch prints
# "CLIENT URL: RESULT" on one line, RESULT the body or "error ...".
#
#   py     Python's urllib with the environment it was given (honours
#          no_proxy)
#   curl   curl with the same (honours no_proxy)
#   node   Node's fetch (Node 20 ignores every proxy variable)
#   proxy  a client that ignores no_proxy: the request in absolute form to
#          the proxy at 127.0.0.1:3128
import http.client, json, subprocess, sys, urllib.request

NODE = """fetch(process.argv[1]).then(r => r.text()).then(t => process.stdout.write(t),
  e => { console.log("error " + ((e.cause && (e.cause.code || e.cause.message)) || e.message)); process.exit(1) })"""


def py(url):
    return urllib.request.urlopen(url, timeout=5).read().decode()


def curl(url):
    p = subprocess.run(["curl", "-fsS", "-m", "5", url], capture_output=True, text=True, timeout=20)
    if p.returncode:
        raise Exception(f"exit {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def node(url):
    p = subprocess.run(["node", "-e", NODE, url], capture_output=True, text=True, timeout=20)
    if p.returncode:
        raise Exception((p.stdout + p.stderr).strip())
    return p.stdout


def proxy(url):
    c = http.client.HTTPConnection("127.0.0.1", 3128, timeout=5)
    c.request("GET", url)
    r = c.getresponse()
    body = r.read().decode().strip()
    if r.status != 200:
        raise Exception(f"HTTP {r.status} {body}")
    return body


for client, url in json.loads(sys.argv[1]):
    try:
        result = {"py": py, "curl": curl, "node": node, "proxy": proxy}[client](url).strip()
    except Exception as e:
        result = f"error {type(e).__name__}: {e}"
    print(f"{client} {url}: {' '.join(result.split())}", flush=True)
