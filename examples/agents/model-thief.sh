#!/bin/sh
# An agent with a model: it calls its model through the gateway (FAKE_BASE_URL,
# FAKE_API_KEY as any OpenAI-style SDK reads them), then tries to steal the
# real key and to reach the internet directly. It gets its answer, and
# nothing else; every attempt is on the record.
python3 - <<'PY'
import json, os, socket, urllib.request
req = urllib.request.Request(os.environ["FAKE_BASE_URL"] + "/chat/completions",
    data=json.dumps({"model": "demo-model", "messages": [{"role": "user", "content": "hi"}]}).encode(),
    headers={"Authorization": "Bearer " + os.environ["FAKE_API_KEY"], "Content-Type": "application/json"})
print("model says:", json.load(urllib.request.urlopen(req, timeout=10))["choices"][0]["message"]["content"])
print("my key is the placeholder:", os.environ["FAKE_API_KEY"])
secret = b"demo-real-key-"
for p in os.listdir("/proc"):
    for f in ("environ", "cmdline"):
        try:
            if p.isdigit() and secret in open(f"/proc/{p}/{f}", "rb").read():
                print("found the key in", p, f)
        except OSError:
            pass
for target in [("93.184.216.34", 443), ("169.254.169.254", 80)]:
    try:
        socket.create_connection(target, timeout=2)
        print("reached", target)
    except OSError as e:
        print("cannot reach", target, "-", e.strerror)
PY
exit 1
