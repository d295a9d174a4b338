"""Checks /app/summary.txt, and /app/summarize.sh on logs it has never seen."""
import os
import subprocess
from pathlib import Path


def line(addr, status, size=512, request="GET / HTTP/1.1"):
    return f'{addr} - - [12/Nov/2025:09:00:00 +0000] "{request}" {status} {size} "-" "curl/8.14.1"\n'


def summarize(log):
    r = subprocess.run(["/app/summarize.sh"], input=log, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_summary_of_the_shipped_log():
    assert Path("/app/summary.txt").read_text() == "9 192.0.2.10\n7 198.51.100.7\n7 203.0.113.5\n5xx 9\n"


def test_script_is_executable():
    assert os.access("/app/summarize.sh", os.X_OK)


def test_counts_and_ties_in_byte_order():
    log = (line("9.9.9.9", 200) * 2 + line("10.0.0.2", 503) * 2 + line("10.0.0.10", 200) * 2
           + line("172.16.0.1", 500) * 3 + line("8.8.8.8", 404))
    assert summarize(log) == "3 172.16.0.1\n2 10.0.0.10\n2 10.0.0.2\n5xx 5\n"


def test_status_is_the_status_field():
    log = (line("192.0.2.1", 200, size=500) + line("192.0.2.2", 404, request="GET /500 HTTP/1.1")
           + line("192.0.2.3", 599) + line("192.0.2.3", 301, size=503))
    assert summarize(log) == "2 192.0.2.3\n1 192.0.2.1\n1 192.0.2.2\n5xx 1\n"


def test_no_server_errors():
    log = line("198.51.100.1", 200) * 4 + line("198.51.100.2", 302) + line("198.51.100.3", 404) * 2
    assert summarize(log) == "4 198.51.100.1\n2 198.51.100.3\n1 198.51.100.2\n5xx 0\n"
