"""``read_json_object``: the one bounded reader of a hand-written JSON file. Each way a file
can be wrong is one ``JsonFileError`` that starts with the path, keeps the bound and says what to
do."""

from __future__ import annotations

from pathlib import Path

import pytest

from plait.errors import ConfigurationError
from plait.jsonfile import MAX_JSON_FILE_BYTES, JsonFileError, read_json_object


def test_an_object_within_the_bound_is_returned(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(b'\xef\xbb\xbf{"k": [1, "\xc3\xa9"]}')  # an editor's BOM is accepted
    assert read_json_object(path) == {"k": [1, "é"]}
    exact = tmp_path / "exact.json"
    exact.write_bytes(b"{}" + b" " * 8)
    assert read_json_object(exact, max_bytes=10) == {}


@pytest.mark.parametrize(
    ("content", "needles"),
    [
        (b"{}" + b" " * 9, ["is larger than 10 bytes", "trim it"]),
        (b"{not json", ["is not valid JSON", "line 1 column 2", "fix it"]),
        (b'{"a": 1,}', ["is not valid JSON"]),
        (b"", ["is not valid JSON"]),
        (b'{"a": "\xff"}', ["is not UTF-8 text", "save it as UTF-8"]),
        (b"[" * 100_000 + b"]" * 100_000, ["nests too deeply", "flatten it"]),
        (b"[1, 2]", ['must hold a JSON object ({"servers": {...}}), not an array']),
        (b'"text"', ["not a string"]),
        (b"12", ["not a number"]),
        (b"true", ["not a boolean"]),
        (b"null", ["not null"]),
    ],
)
def test_a_bad_file_is_one_error_naming_the_file_and_what_to_do(
    tmp_path: Path, content: bytes, needles: list[str]
) -> None:
    path = tmp_path / "settings.json"
    path.write_bytes(content)
    bound = 10 if len(content) < 20 else len(content)
    with pytest.raises(JsonFileError) as info:
        read_json_object(path, max_bytes=bound, shape='{"servers": {...}}')
    error = info.value
    assert isinstance(error, ConfigurationError)
    assert str(error).startswith(f"{path}: ") and error.path == path
    assert error.max_bytes == bound
    for needle in needles:
        assert needle in str(error)


def test_the_default_bound_is_one_mebibyte(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b"{}" + b" " * (MAX_JSON_FILE_BYTES - 1))
    with pytest.raises(JsonFileError, match="larger than 1,048,576 bytes"):
        read_json_object(path)
    path.write_bytes(b"{}" + b" " * (MAX_JSON_FILE_BYTES - 2))
    assert read_json_object(path) == {}


def test_an_endless_file_is_read_only_up_to_the_bound(tmp_path: Path) -> None:
    """A device that never ends (``/dev/zero``) stops at the bound instead of filling memory."""
    with pytest.raises(JsonFileError, match="larger than 64 bytes"):
        read_json_object(Path("/dev/zero"), max_bytes=64)


def test_a_file_that_cannot_be_read_says_so(tmp_path: Path) -> None:
    with pytest.raises(JsonFileError, match=r"cannot read it \(No such file") as missing:
        read_json_object(tmp_path / "none.json")
    assert "check the path" in str(missing.value)
    with pytest.raises(JsonFileError, match=r"cannot read it \(Is a directory"):
        read_json_object(tmp_path)
