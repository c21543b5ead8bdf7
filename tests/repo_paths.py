"""Where the tests find the checkout and the shared corpora, wherever a test file sits."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Histories with known verdicts, beside the checkout (read at run time, never copied in).
CORPORA = ROOT.parent / "shared" / "corpora"
TESTS = ROOT / "tests"
