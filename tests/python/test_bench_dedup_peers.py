"""bench/python/bench_dedup_peers.py, the script `grist bench dedup` runs its Python peers with:
with --no-scores (the runs in turns with grist's) it gives datasketch's rates and nothing of the
exact pairs; without, the pairs are scored against exact Jaccard. On a dozen short documents, two
of them near copies, so both runs take a few seconds."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "python", "bench_dedup_peers.py")


def run(docs, *args):
    p = subprocess.run([sys.executable, SCRIPT, str(docs), "--peers", "datasketch",
                        "--repetitions", "1", *args], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_no_scores_gives_rates_only_and_the_default_scores(tmp_path):
    pytest.importorskip("datasketch")
    words = [f"w{i}" for i in range(400)]
    texts = [" ".join(words[k * 30:(k + 1) * 30] * 2) for k in range(12)]
    texts.append(texts[0] + " one more")  # a near copy of the first
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))

    rates = run(docs, "--no-scores")
    assert rates["datasketch_docs"] == len(texts)
    whole = rates["datasketch_whole_mb_per_s"]
    assert len(whole) == 1 and whole[0] > 0
    assert "datasketch_error" not in rates
    for key in ("datasketch_truth_pairs", "datasketch_precision", "datasketch_recall"):
        assert key not in rates

    scored = run(docs)
    assert scored["datasketch_truth_pairs"] == 1
    assert scored["datasketch_recall"] == 1.0
    assert 0 < scored["datasketch_precision"] <= 1.0
