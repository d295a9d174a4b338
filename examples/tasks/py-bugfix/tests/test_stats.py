import unittest

import stats


class MeanTest(unittest.TestCase):
    def test_integers(self):
        self.assertEqual(stats.mean([1, 2, 3, 4]), 2.5)

    def test_floats(self):
        self.assertAlmostEqual(stats.mean([0.1, 0.2, 0.3]), 0.2)

    def test_single(self):
        self.assertEqual(stats.mean([7]), 7)

    def test_empty(self):
        with self.assertRaises(ValueError):
            stats.mean([])


if __name__ == "__main__":
    unittest.main()
