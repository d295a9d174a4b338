"""Hidden tests for stats.mean.

The submission is never imported into this process: each case runs in a
fresh, isolated interpreter (python3 -I: no PYTHONPATH, no user site, no
script directory) with /app appended after the standard library, so the
submission can neither shadow a standard module nor rig this runner; only
what each case prints is compared here.
"""
import math
import subprocess
import sys
import unittest

CASE = """
import sys
sys.path.append("/app")
import stats
try:
    print(repr(float(stats.mean({xs!r}))))
except ValueError:
    print("ValueError")
"""


def run(xs):
    p = subprocess.run([sys.executable, "-I", "-c", CASE.format(xs=xs)],
                       capture_output=True, text=True, timeout=30, cwd="/")
    lines = p.stdout.strip().splitlines()
    return p.returncode, (lines[-1] if lines else "")


class MeanTest(unittest.TestCase):
    def check(self, xs, want):
        code, out = run(xs)
        self.assertEqual(code, 0, out)
        self.assertTrue(math.isclose(float(out), want, rel_tol=1e-9), f"mean({xs}) printed {out!r}, want {want}")

    def test_integers(self):
        self.check([1, 2, 3, 4], 2.5)

    def test_floats(self):
        self.check([0.1, 0.2, 0.3], 0.2)

    def test_single(self):
        self.check([7], 7.0)

    def test_empty(self):
        code, out = run([])
        self.assertEqual((code, out), (0, "ValueError"))


if __name__ == "__main__":
    unittest.main()
