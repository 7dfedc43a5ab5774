"""benchmarks/suite_time.py reads pytest's summary and durations into its record."""

from benchmarks.suite_time import parse

OUTPUT = """\
........s.F                                                              [100%]
============================= slowest durations ==============================
12.50s call     tests/a/test_x.py::test_slow[1]
2.25s setup    tests/a/test_x.py::test_slow[1]
0.75s call     tests/b/test_y.py::test_quick
0.01s teardown tests/b/test_y.py::test_quick
=========================== short test summary info ============================
FAILED tests/c/test_z.py::test_broken - AssertionError
1 failed, 1851 passed, 44 skipped, 2 errors, 550 warnings in 1246.06s (0:20:46)
"""


def test_counts_summed_time_and_slowest_tests():
    record = parse(OUTPUT, slowest=1)
    assert record["counts"] == {"failed": 1, "passed": 1851, "skipped": 44, "error": 2}
    assert record["test_seconds"] == 15.5  # setup, call and teardown of every test
    assert record["slowest"] == [{"test": "tests/a/test_x.py::test_slow[1]", "seconds": 14.8}]


def test_output_without_a_summary_gives_no_counts():
    assert parse("ERROR: file or directory not found: tests/nope\n")["counts"] == {}
