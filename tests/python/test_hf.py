"""Hugging Face interop: Parquet files and `datasets` datasets in (python -m grist.hf, through
grist clean and grist build), and grist's document parts out (datasets.load_dataset("json") reads
every document of every zstd frame of clean's and dedup's output).
"""

import glob
import json
import os
import struct
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import grist_testkit as kit

N_DOCS = 1400  # about 3.5 MB of text: clean's parts hold several 1 MiB zstd frames


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hf")
    docs = kit.synthetic_documents(N_DOCS, seed=3)
    texts = [d["text"] for d in docs]
    ids = [d["id"] for d in docs]
    # Exact duplicates for dedup to remove, and a row without text.
    texts += [texts[5], texts[6], None]
    ids += ["dup-5", "dup-6", "no-text"]
    table = pa.table({"text": texts, "id": ids, "lang": ["en"] * len(ids)})
    data = tmp / "data"
    data.mkdir()
    pq.write_table(table.slice(0, 700), data / "part-0.parquet", row_group_size=200)
    pq.write_table(table.slice(700), data / "part-1.parquet", row_group_size=200)
    return tmp, sorted(glob.glob(str(data / "*.parquet"))), texts, ids


def hf(*args):
    p = subprocess.run([sys.executable, "-m", "grist.hf", *map(str, args)], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f]


def frames_of(part):
    """The number of data frames a part's index frame lists (docs/formats/documents.md)."""
    raw = open(part, "rb").read()
    assert raw[-8:] == b"GRISTIDX"
    return struct.unpack("<I", raw[-20:-16])[0]


def load_json(files, cache):
    import datasets
    datasets.disable_progress_bars()
    return datasets.load_dataset("json", data_files=files, split="train", cache_dir=str(cache))


def test_parquet_converts_row_for_row(corpus):
    tmp, files, texts, ids = corpus
    out = tmp / "conv" / "corpus.jsonl"
    counts = hf(*files, "--output", out, "--id-field", "id", "--keep", "lang")
    assert counts == {"output": str(out), "rows": N_DOCS + 3, "written": N_DOCS + 2,
                      "skipped_no_text": 1}
    rows = read_jsonl(out)
    assert [r["id"] for r in rows] == [i for i, t in zip(ids, texts) if t is not None]
    assert [r["text"] for r in rows] == [t for t in texts if t is not None]
    assert rows[0]["lang"] == "en" and sorted(rows[0]) == ["id", "lang", "text"]
    # Without --id-field: "<path>:<row>".
    hf(files[0], "--output", tmp / "conv2.jsonl", "--limit", "3")
    assert [r["id"] for r in read_jsonl(tmp / "conv2.jsonl")] == [f"{files[0]}:{i}"
                                                                  for i in range(3)]
    # Errors name the missing column; nothing is left behind.
    p = subprocess.run([sys.executable, "-m", "grist.hf", files[0], "--text-field", "body",
                        "--output", str(tmp / "bad.jsonl")], capture_output=True, text=True)
    assert p.returncode == 2 and "no column 'body'" in p.stderr
    assert not os.path.exists(tmp / "bad.jsonl") and not os.path.exists(tmp / "bad.jsonl.tmp")


def test_hf_dataset_by_name_goes_through_datasets(corpus):
    tmp, files, texts, ids = corpus
    # A local dataset folder is a dataset name to datasets.load_dataset (no network needed).
    out = tmp / "byname.jsonl"
    counts = hf("--hf-dataset", os.path.dirname(files[0]), "--split", "train", "--id-field", "id",
                "--output", out)
    assert counts["rows"] == N_DOCS + 3 and counts["written"] == N_DOCS + 2
    assert sorted(r["id"] for r in read_jsonl(out)) == sorted(
        i for i, t in zip(ids, texts) if t is not None)


def test_clean_and_dedup_parts_read_completely_with_load_dataset(corpus):
    tmp, files, texts, ids = corpus
    jsonl = tmp / "in" / "corpus.jsonl"
    hf(*files, "--output", jsonl, "--id-field", "id")
    cleaned, deduped = tmp / "cleaned", tmp / "deduped"
    kit.run_grist("clean", "--input", jsonl, "--output", cleaned, "--quiet",
                  "--json", tmp / "clean.json")
    rep = json.load(open(tmp / "clean.json"))
    parts = sorted(glob.glob(str(cleaned / "*.jsonl.zst")))
    assert parts and max(frames_of(p) for p in parts) >= 2, "want parts of several frames"
    assert rep["docs"]["in"] == N_DOCS + 2
    kept = load_json(parts, tmp / "cache1")
    assert len(kept) == rep["docs"]["kept"] > N_DOCS // 2
    import datasets
    streamed = datasets.load_dataset("json", data_files=parts, split="train", streaming=True)
    assert sum(1 for _ in streamed) == len(kept)
    # Every kept record traces back to its Parquet row; grist.line is the JSONL line.
    by_id = {i: t for i, t in zip(ids, texts) if t is not None}
    assert all(m["id"] in by_id for m in kept["meta"])
    assert len({(g["src"], g["line"]) for g in kept["grist"]}) == len(kept)
    kit.run_grist("dedup", "--input", cleaned, "--output", deduped, "--quiet")
    dparts = sorted(glob.glob(str(deduped / "*.jsonl.zst")))
    ddocs = load_json(dparts, tmp / "cache2")
    dids = [m["id"] for m in ddocs["meta"]]
    assert len(dids) == len(set(dids))
    kept_ids = set(m["id"] for m in kept["meta"])
    # The duplicates are gone, one copy of each kept; no other document is lost in reading.
    for a, b in (("doc-00005", "dup-5"), ("doc-00006", "dup-6")):
        if a in kept_ids and b in kept_ids:
            assert (a in dids) != (b in dids)
    zstd_docs = subprocess.run(["sh", "-c", "zstd -dc " + " ".join(dparts) + " | wc -l"],
                               capture_output=True, text=True, check=True).stdout
    assert len(ddocs) == int(zstd_docs)


def test_parquet_input_builds_a_release(corpus):
    tmp, files, texts, ids = corpus
    jsonl = tmp / "build-in" / "corpus.jsonl"
    hf(*files, "--output", jsonl, "--id-field", "id")
    cfg = tmp / "release.toml"
    cfg.write_text(kit.release_config([str(jsonl)], clean=True, dedup=True,
                                      shard_max_bytes=1 << 20))
    out = tmp / "rel"
    kit.run_grist("build", "--config", cfg, "--output", out, "--quiet")
    kit.run_grist("verify", out)
    m = kit.manifest(out)
    total = m["counts"]["total"]
    assert total["documents_in"] == N_DOCS + 2
    assert total["documents_removed"] >= 2  # the two exact duplicates
    assert m["splits"]["train"]["documents"] + m["splits"]["validation"]["documents"] == \
        total["documents_in_shards"]
