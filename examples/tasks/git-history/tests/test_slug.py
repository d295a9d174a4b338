"""Hidden tests for slug.slugify, each case in a fresh isolated interpreter
(see py-bugfix/tests/test_stats.py for why)."""
import subprocess
import sys
import unittest

CASE = """
import sys
sys.path.append("/app")
from slug import slugify
print(repr(slugify({text!r})))
"""


def slugify(text):
    p = subprocess.run([sys.executable, "-I", "-c", CASE.format(text=text)],
                       capture_output=True, text=True, timeout=30, cwd="/")
    lines = p.stdout.strip().splitlines()
    return p.returncode, (lines[-1] if lines else "")


class Slugify(unittest.TestCase):
    def check(self, text, want):
        self.assertEqual(slugify(text), (0, repr(want)))

    def test_examples(self):
        self.check("Hello, World!", "hello-world")
        self.check("  A -- B  ", "a-b")
        self.check("Proctor 2.0: the sequel", "proctor-2-0-the-sequel")

    def test_plain(self):
        self.check("abc", "abc")


if __name__ == "__main__":
    unittest.main()
