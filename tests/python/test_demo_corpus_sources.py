"""scripts/make_demo_corpus.sh takes the copyright files of the packages in setup.sh's PACKAGES list
and of no other: the demo corpus, and with it the release id the README shows, must not change when
setup.sh installs one more tool (it goes to TOOLS) or when a comment in the list holds a bracket.
`--packages` prints the list as bash reads setup.sh; it is checked against the packages the
README's release 4a6d086bbb9f01eddac4afca6fdb17c8 was built from."""

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SOURCES = """
bible-kjv bible-kjv-text build-essential ca-certificates clang cmake dict-gcide fio fortunes
fortunes-de fortunes-es fortunes-it g++ git libabsl-dev libbenchmark-dev libclang-rt-14-dev
libcli11-dev libgmock-dev libgtest-dev libhwy-dev libsentencepiece-dev libsimdjson-dev
libtomlplusplus-dev liburing-dev libutf8proc-dev libxxhash-dev libzstd-dev ninja-build pkg-config
pybind11-dev python3 python3-dev python3-venv sentencepiece zlib1g-dev zstd
""".split()


def packages(script):
    p = subprocess.run(["bash", script, "--packages"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


def test_the_corpus_takes_setups_package_list_and_nothing_else():
    script = os.path.join(ROOT, "scripts", "make_demo_corpus.sh")
    assert sorted(packages(script)) == sorted(SOURCES)


def test_a_bracket_in_a_comment_of_the_list_cuts_nothing(tmp_path):
    # A copy of both scripts whose setup.sh has a comment with ")" inside the list (what once cut
    # the list short, and the corpus with it).
    with open(os.path.join(ROOT, "scripts", "setup.sh")) as f:
        setup = f.read()
    marker = "PACKAGES=(\n"
    assert marker in setup
    setup = setup.replace(marker, marker + "  # the toolchain (compilers)\n", 1)
    (tmp_path / "setup.sh").write_text(setup)
    with open(os.path.join(ROOT, "scripts", "make_demo_corpus.sh")) as f:
        (tmp_path / "make_demo_corpus.sh").write_text(f.read())
    assert sorted(packages(str(tmp_path / "make_demo_corpus.sh"))) == sorted(SOURCES)
