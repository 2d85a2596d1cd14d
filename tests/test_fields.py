"""pipeline/fields.py: what a key's declaration carries, and the value checks it shares."""

import dataclasses

import pytest

from pipeline.fields import fraction, is_sha256, is_url, positive_int, spec


def test_a_declaration_carries_meaning_expectation_check_and_whether_it_may_be_left_out():
    f = spec("a thing", lambda v: v == 1, help="What it is.", optional_key=True)
    assert f.metadata["expect"] == "a thing" and f.metadata["help"] == "What it is."
    assert f.metadata["check"](1) and not f.metadata["check"](2)
    assert f.metadata["optional_key"] is True and spec(help="x.").metadata["optional_key"] is False
    assert f.default is dataclasses.MISSING  # no default: defaults live in params.yaml only


@pytest.mark.parametrize(
    "declared, good, bad",
    [
        (positive_int("n."), [1, 9], [0, -1]),
        (fraction("f."), [0.0, 0.5], [1.0, -0.1]),
        (fraction("f.", low_open=True), [0.5], [0.0, 1.0]),
    ],
)
def test_the_shared_range_checks(declared, good, bad):
    check = declared.metadata["check"]
    assert all(check(v) for v in good) and not any(check(v) for v in bad)


def test_a_url_and_a_sha256():
    assert is_url("file:///srv/x.tar.gz") and is_url("https://h/x") and not is_url("ftp://h/x")
    assert not is_url("/srv/x")
    assert is_sha256("A" * 64) and not is_sha256("g" * 64) and not is_sha256("a" * 63)
