"""The .env reader against python-dotenv's parser, case by case (table-driven).

python-dotenv is what Python users' .env files are written for (and honcho's
documentation points at). Each row is a .env text and the values
python-dotenv 1.2.4's dotenv_values() gives for it with none of the names in
the environment (checked against it when the table was written); the reader
must give the same. DIFFERENT lists the deliberate differences, with the
value proctree gives and why.
"""

import pytest

from proctree import ProcfileError
from proctree._procfile.dotenv import parse_dotenv

# (text, the values python-dotenv reads from it)
AGREED = [
    ("A=1\n", {"A": "1"}),
    ("export A=1\n", {"A": "1"}),
    ("A = 1\n", {"A": "1"}),
    ("A=1 # note\n", {"A": "1"}),
    ("A=http://h/#frag\n", {"A": "http://h/#frag"}),
    ("A=\n", {"A": ""}),
    ("A= # note\n", {"A": ""}),
    ("A=#x\n", {"A": "#x"}),
    ("A='x y'\n", {"A": "x y"}),
    ("A='it\\'s'\n", {"A": "it's"}),
    ("A='a\\\\b'\n", {"A": "a\\b"}),
    ("A='a\\nb'\n", {"A": "a\\nb"}),
    ('A="a\\nb"\n', {"A": "a\nb"}),
    ('A="a\\tb\\"c\\\\d"\n', {"A": 'a\tb"c\\d'}),
    ('A="it\\\'s"\n', {"A": "it's"}),
    ('A="multi\nline"\n', {"A": "multi\nline"}),
    ("A='multi\nline'\n", {"A": "multi\nline"}),
    ("A=c:\\path\\n\n", {"A": "c:\\path\\n"}),
    ("A=a\\b\n", {"A": "a\\b"}),
    ("A=1\rB=2\r", {"A": "1", "B": "2"}),
    ("A=1\r\nB=2\r\n", {"A": "1", "B": "2"}),
    ("A=1\nB=${A}\n", {"A": "1", "B": "1"}),
    ('A=1\nB="${A}x"\n', {"A": "1", "B": "1x"}),
    ("B=${NOPE:-fallback}\n", {"B": "fallback"}),
    ('B="${NOPE:-fall back}"\n', {"B": "fall back"}),
    ("A=1\nB=${A:-fallback}\n", {"A": "1", "B": "1"}),
    ("A=\nB=${A:-fallback}\n", {"A": "", "B": ""}),
    ("B=${NOPE}\n", {"B": ""}),
    ("# comment\n\nA=1\n", {"A": "1"}),
]

# (text, proctree's values, python-dotenv's, why they differ)
DIFFERENT = [
    # Single quotes are literal, as in foreman (the dotenv gem) and the shell: a '$' in a
    # single-quoted password stays. python-dotenv expands ${...} in them too.
    ("A=1\nB='${A}'\n", {"A": "1", "B": "${A}"}, {"A": "1", "B": "1"}),
    # $NAME expands, as foreman and the shell expand it; python-dotenv expands only ${NAME}.
    ("A=1\nB=$A\n", {"A": "1", "B": "1"}, {"A": "1", "B": "$A"}),
    # \$ keeps a '$' from expanding (foreman's); python-dotenv keeps the backslash and expands.
    ('A=1\nB="\\${A}"\n', {"A": "1", "B": "${A}"}, {"A": "1", "B": "\\1"}),
]


@pytest.mark.parametrize("text, expected", AGREED)
def test_reads_as_python_dotenv(text, expected):
    assert parse_dotenv(text) == expected


@pytest.mark.parametrize("text, ours, theirs", DIFFERENT)
def test_deliberate_differences(text, ours, theirs):
    assert parse_dotenv(text) == ours != theirs


def test_the_default_is_taken_as_written_and_a_set_name_wins():
    assert parse_dotenv("B=${A:-$C}\n", base={"C": "c"}) == {"B": "$C"}
    assert parse_dotenv("B=${A:-x}\n", base={"A": "from the environment"}) == {"B": "from the environment"}


def test_a_lone_cr_ends_a_line_and_counts_in_line_numbers():
    with pytest.raises(ProcfileError, match=r"^E:3: "):
        parse_dotenv("A=1\rB=2\r'nonsense\n", "E")
