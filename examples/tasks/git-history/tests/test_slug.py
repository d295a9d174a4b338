import unittest

from slug import slugify


class Slugify(unittest.TestCase):
    def test_examples(self):
        self.assertEqual(slugify("Hello, World!"), "hello-world")
        self.assertEqual(slugify("  A -- B  "), "a-b")
        self.assertEqual(slugify("Proctor 2.0: the sequel"), "proctor-2-0-the-sequel")

    def test_plain(self):
        self.assertEqual(slugify("abc"), "abc")


if __name__ == "__main__":
    unittest.main()
