"""The one validator of each fact the supervisor and `proctree up`'s readers share: ports, env names, commands."""

import pytest

from proctree._validate import ENV_NAME, check_command, check_port, is_env_name, is_port, port_from_text


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, True), (80, True), (65535, True), (0, False), (-1, False), (65536, False), (2**70, False),
     (True, False), (False, False), (80.0, False), ("80", False), (None, False)],
)  # fmt: skip
def test_is_port(value, expected):
    assert is_port(value) is expected


@pytest.mark.parametrize(
    ("value", "error"),
    [(0, ValueError), (65536, ValueError), (-5, ValueError), (True, TypeError), ("8000", TypeError), (8.0, TypeError)],
)
def test_check_port_refuses(value, error):
    with pytest.raises(error, match="port"):
        check_port(value)


def test_check_port_names_what_and_the_range():
    assert check_port(8000) == 8000
    with pytest.raises(ValueError, match=r"ready port must be 1-65535, got 0"):
        check_port(0, "ready port")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5000", 5000),
        ("1", 1),
        ("65535", 65535),
        ("08000", 8000),
        ("0", None),
        ("65536", None),
        ("000080", None),  # more than five digits is not how a port is written
        ("", None),
        ("-1", None),
        ("+80", None),
        (" 80", None),
        ("8_000", None),
        ("80a", None),
        ("\u0668\u0660", None),  # Arabic-Indic digits
        ("\u00b2", None),  # a superscript two is a digit to str.isdigit()
    ],
)
def test_port_from_text(text, expected):
    assert port_from_text(text) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("PATH", True),
        ("_", True),
        ("_x1", True),
        ("lower_case", True),
        ("", False),
        ("1A", False),
        ("A-B", False),
        ("A.B", True),  # the dotenv gem's, and so foreman's
        (".A", False),
        ("A=B", False),
        ("A B", False),
        ("A\0", False),
        ("É", False),
        (None, False),
        (1, False),
    ],
)
def test_is_env_name(name, expected):
    assert is_env_name(name) is expected


def test_env_name_scans_a_prefix_for_the_dotenv_reader():
    assert ENV_NAME.match("export A.B-C=1", 7).group() == "A.B"


@pytest.mark.parametrize(
    ("command", "expected"),
    [("echo hi", "echo hi"), (["ls", "-l"], ("ls", "-l")), (("x",), ("x",))],
)
def test_check_command_accepts(command, expected):
    assert check_command(command) == expected


@pytest.mark.parametrize(
    ("command", "error", "match"),
    [
        ("", ValueError, "empty"),
        ("   ", ValueError, "empty"),
        ("a\0b", ValueError, "NUL"),
        ([], ValueError, "empty"),
        ([""], ValueError, "the program"),
        (["a", "b\0"], ValueError, r"command\[1\]"),
        (b"ls", TypeError, "str"),
        (["ls", 1], TypeError, r"command\[1\]"),
        (42, TypeError, "str"),
        ("x" * (32 * 4096), ValueError, "bytes: the kernel takes at most"),
    ],
)
def test_check_command_refuses(command, error, match):
    with pytest.raises(error, match=match):
        check_command(command)
