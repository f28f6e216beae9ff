"""Unit tests of the command line's token resolution (options.resolve_token).

Run: python -m unittest   (in this folder, with the requirements installed)
"""

from __future__ import annotations

import os
import tempfile
import unittest

from options import resolve_token


class ResolveTokenTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.file = self.path("token", " from-file \r\nsecond line\n")

    def path(self, name: str, text: str) -> str:
        p = os.path.join(self.dir.name, name)
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)
        return p

    def test_takes_the_first_given_of_flag_file_and_env(self) -> None:
        self.assertEqual(resolve_token("from-flag", self.file, "from-env"), "from-flag")
        self.assertEqual(resolve_token("", self.file, "from-env"), "")  # --token '' sends none
        self.assertEqual(resolve_token(None, self.file, "from-env"), "from-file")
        self.assertEqual(resolve_token(None, "", " from-env\n"), "from-env")
        self.assertEqual(resolve_token(None, "", ""), "")

    def test_refuses_in_one_line_naming_the_source_never_the_token(self) -> None:
        missing = os.path.join(self.dir.name, "nope")
        cases = [
            ((None, missing, ""), f"--token-file (env EVORA_TOKEN_FILE): cannot read {missing}: No such file or directory"),
            ((None, self.path("empty", "\nx\n"), ""), "is empty: it must hold the token"),
            ((None, "", "tök en"), "the token from EVORA_TOKEN must be printable ASCII without spaces"),
        ]
        for args, want in cases:
            with self.assertRaises(ValueError) as caught:
                resolve_token(*args)
            self.assertIn(want, str(caught.exception))
            self.assertNotIn("\n", str(caught.exception))
            self.assertNotIn("tök", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
