"""The test tree itself: pytest imports test modules by their file name (the folders have no
`__init__.py`), so two test files with one name make the whole run fail at collection."""

import collections
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent


def test_every_test_module_has_its_own_file_name():
    paths = collections.defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        paths[path.name].append(str(path.relative_to(TESTS)))
    clashes = {name: where for name, where in paths.items() if len(where) > 1}
    assert not clashes, f"rename one of each: {clashes}"
