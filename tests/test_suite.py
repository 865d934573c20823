"""The suite's own scheduling data stays true to the tree."""

from pathlib import Path

from tests.conftest import LONGEST


def test_the_longest_modules_exist_once_each():
    """A renamed module would silently lose its place at the front of the queue."""
    here = Path(__file__).parent
    assert [rel for rel in LONGEST if not (here / rel).is_file()] == []
    assert len(set(LONGEST)) == len(LONGEST)
