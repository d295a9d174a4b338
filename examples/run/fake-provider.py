# A stand-in model provider for the demo: answers OpenAI-style chat
# completions on 127.0.0.1, with token usage, and tells whether the real key
# came with the call. Prints its port on stdout, then serves until killed.
import http.server, json, os, sys

KEY = os.environ["FAKE_API_KEY"]

class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        ok = self.headers.get("Authorization") == "Bearer " + KEY
        reply = json.dumps({
            "model": body.get("model", ""),
            "choices": [{"message": {"role": "assistant",
                "content": "the provider got the real key" if ok else "no key"}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
        }).encode()
        self.send_response(200 if ok else 401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)
    def log_message(self, *a):
        pass

srv = http.server.HTTPServer(("127.0.0.1", 0), H)
print(srv.server_address[1], flush=True)
srv.serve_forever()
