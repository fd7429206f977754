"""bench/python/clean_agreement.py on a small generated corpus (no ../shared): grist's filters and
datatrove's, each alone on the same texts, with exact per-filter agreement figures for known cases.

Run by ctest (clean_agreement) with GRIST_BIN set to the grist binary; skipped when datatrove or
spaCy is not importable.
"""

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "python"))

pytest.importorskip("datatrove")
pytest.importorskip("spacy")

import clean_agreement  # noqa: E402

WORDS = ("river city council market school water report people morning station garden "
         "winter summer history museum library doctor teacher harbour village").split()


def prose(seed, sentences=12):
    out = []
    for s in range(sentences):
        w = [WORDS[(seed * 7 + s * 3 + k * 5) % len(WORDS)] for k in range(9)]
        out.append(f"The {w[0]} of the {w[1]} and the {w[2]} have {w[3]} with {w[4]} {w[5]} "
                   f"to {w[6]} that {w[7]} {w[8]}.")
    return " ".join(out[:6]) + "\n" + " ".join(out[6:])


def corpus():
    docs = [prose(i) for i in range(6)]                                  # kept by every filter
    docs.append("Too short to keep.")                                    # short everywhere
    docs.append("\n".join(["Buy the best shoes in the city today."] * 12))  # repeated lines
    docs.append(prose(7) + "\nfunction f() { return 1; } is the code of the page.")  # curly
    docs.append("\n".join(f"Item {i}" for i in range(40)))             # a list of short lines
    # spaCy keeps "Calif." whole after splitting "D-Calif." (its special cases are matched again
    # after the infix split); grist splits off the period, so it counts one more sentence: C4
    # keeps the document in grist (5 sentences) and rejects it in datatrove (4).
    docs.append("Congresswoman Barbara Lee (D-Calif.), the author of the bill, spoke here today.\n"
                "The council of the city met with the people of the river town.\n"
                "The report of the school and the library was read to the people.\n"
                "The museum of the village opened with the history of the harbour.")
    return docs


def test_agreement_on_generated_corpus(tmp_path):
    grist = os.environ.get("GRIST_BIN") or os.path.join(ROOT, "build", "grist")
    if not os.path.exists(grist):
        if os.environ.get("GRIST_BIN"):  # ctest names the built binary: its absence is a failure
            pytest.fail(f"GRIST_BIN={grist} does not exist")
        pytest.skip(f"no grist binary at {grist} (set GRIST_BIN)")
    src = tmp_path / "gen.jsonl"
    with open(src, "w") as f:
        for d in corpus():
            f.write(json.dumps({"text": d}) + "\n")
    out = tmp_path / "report.json"
    details = tmp_path / "details.jsonl"
    rc = clean_agreement.main(["--grist", grist, "--set", f"gen={src}", "--jobs", "1",
                               "--json", str(out), "--details", str(details), "--quiet"])
    assert rc == 0
    rep = json.loads(out.read_text())["sets"]["gen"]
    got = {f: (r["docs"], r["agree"], r["grist_rejected"], r["datatrove_rejected"],
               r["disagreements"]) for f, r in rep.items()}
    assert got == EXPECTED
    d = [json.loads(line) for line in details.read_text().splitlines()]
    assert [(x["filter"], x["doc"], x["class"], x["grist"], x["datatrove"]) for x in d] == [
        ("c4", 10, "sentence splitting", "keep", "too_few_sentences")]


# docs, agreeing, rejected by grist, rejected by datatrove, disagreement classes
EXPECTED = {
    "gopher_repetition": (11, 11, 2, 2, {}),
    "gopher_quality": (11, 11, 3, 3, {}),
    "c4": (11, 10, 3, 4, {"sentence splitting": 1}),
    "fineweb": (11, 11, 3, 3, {}),
}
