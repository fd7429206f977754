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


# Parquet files and `datasets` datasets read by the stages themselves (grist clean --input
# x.parquet / --hf-dataset, inputs.paths / inputs.hf_datasets of grist build): the C++ record reader
# runs python/grist/hf.py in its records mode as a child process.

def rows_as_jsonl(table, path):
    """The rows of a pyarrow table as the JSONL file a user would have written: one object per row,
    columns in schema order."""
    with open(path, "w", encoding="utf-8") as f:
        for row in table.to_pylist():
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def kept_and_rejected(folder):
    """(kept, rejected) records of a clean output folder, in order, without their provenance."""
    def read(pattern):
        out = []
        for part in sorted(glob.glob(pattern)):
            out += [json.loads(l) for l in subprocess.run(["zstd", "-dcq", part], check=True,
                                                          capture_output=True).stdout.splitlines()]
        return out
    return read(str(folder / "*.jsonl.zst")), read(str(folder / "rejects" / "*.jsonl.zst"))


def test_clean_reads_parquet_rows_as_records(corpus):
    tmp, files, texts, ids = corpus
    out = tmp / "pq-clean"
    kit.run_grist("clean", "--input", *files, "--output", out, "--quiet", "--json", tmp / "pq.json")
    rep = json.load(open(tmp / "pq.json"))
    assert rep["docs"]["in"] == N_DOCS + 3  # every row, the one without text included
    assert rep["docs"]["kept"] + rep["docs"]["rejected"] == N_DOCS + 3
    kept, rejected = kept_and_rejected(out)
    # The row without text is rejected, named by its file and 1-based row (part-1 row 703).
    bad = [r for r in rejected if "bad_record" in r["reasons"]]
    assert len(bad) == 1
    assert bad[0]["error"] == f"{files[1]}:703: text field 'text' is not a string"
    assert bad[0]["grist"] == {"src": files[1], "line": 703}
    assert json.loads(bad[0]["text"]) == {"text": None, "id": "no-text", "lang": "en"}
    # Kept records: the Parquet row's columns in meta, provenance (file, row) in order.
    assert kept and all(sorted(k["meta"]) == ["id", "lang"] and k["meta"]["lang"] == "en"
                        for k in kept)
    lines = [(k["grist"]["src"], k["grist"]["line"]) for k in kept]
    assert lines == sorted(lines, key=lambda x: (files.index(x[0]), x[1]))

    # The same rows as JSONL files clean to the same documents with the same verdicts.
    jdir = tmp / "pq-as-jsonl"
    jdir.mkdir()
    jfiles = []
    for f in files:
        j = jdir / (os.path.basename(f)[:-len(".parquet")] + ".jsonl")
        rows_as_jsonl(pq.read_table(f), j)
        jfiles.append(str(j))
    kit.run_grist("clean", "--input", *jfiles, "--output", tmp / "j-clean", "--quiet")
    jkept, jrejected = kept_and_rejected(tmp / "j-clean")
    strip = lambda recs: [{k: v for k, v in r.items() if k != "grist"} for r in recs]
    assert strip(kept) == strip(jkept)
    assert [r["grist"]["line"] for r in kept] == [r["grist"]["line"] for r in jkept]
    assert len(rejected) == len(jrejected)


def test_clean_parquet_errors_name_the_file(corpus, tmp_path):
    tmp, files, texts, ids = corpus
    # A missing text column: one line naming the file and the columns, exit status 1.
    p = kit.run_grist("clean", "--input", files[0], "--output", tmp_path / "o1", "--quiet",
                      "--text-field", "body", check=False)
    assert p.returncode == 1, p.stderr
    assert f"{files[0]}: no column 'body' (columns: text, id, lang)" in p.stderr
    # No Python at all.
    p = kit.run_grist("clean", "--input", files[0], "--output", tmp_path / "o2", "--quiet",
                      check=False, env={**os.environ, "GRIST_PYTHON": str(tmp_path / "no-python")})
    assert p.returncode == 1
    assert f"{files[0]}: reading Parquet needs Python 3 with pyarrow: cannot run" in p.stderr
    # A Python without pyarrow (a stand-in package that fails to import shadows it).
    fake = tmp_path / "fake"
    (fake / "pyarrow").mkdir(parents=True)
    (fake / "pyarrow" / "__init__.py").write_text("raise ImportError(\"No module named 'pyarrow'\")\n")
    wrapper = tmp_path / "python-without-pyarrow"
    wrapper.write_text(f"#!/bin/sh\nPYTHONPATH={fake} exec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    p = kit.run_grist("clean", "--input", files[0], "--output", tmp_path / "o3", "--quiet",
                      check=False, env={**os.environ, "GRIST_PYTHON": str(wrapper)})
    assert p.returncode == 1
    assert f"{files[0]}: reading Parquet needs the Python module 'pyarrow'" in p.stderr
    # Not a Parquet file.
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet\n")
    p = kit.run_grist("clean", "--input", junk, "--output", tmp_path / "o4", "--quiet", check=False)
    assert p.returncode == 1 and f"{junk}: not a readable Parquet file" in p.stderr


def release_bytes(rel):
    """Every file of a release except the manifest and reports (which name the inputs), by path."""
    out = {}
    for root, _, names in os.walk(rel):
        for n in names:
            path = os.path.join(root, n)
            rp = os.path.relpath(path, rel)
            if rp == "manifest.json" or rp.startswith("reports"):
                continue
            out[rp] = open(path, "rb").read()
    return out


def test_parquet_and_dataset_inputs_build_the_release_jsonl_builds(corpus):
    import datasets
    datasets.disable_progress_bars()
    tmp, files, texts, ids = corpus
    src = tmp / "eq"
    src.mkdir()
    table = pq.read_table(files[0]).slice(0, 300)  # rows 0-299 of part-0
    pq.write_table(table, src / "rows.parquet", row_group_size=64)
    rows_as_jsonl(table, src / "rows.jsonl")
    ds = datasets.Dataset.from_dict(table.to_pydict())
    datasets.DatasetDict({"train": ds, "test": ds.select(range(10))}).save_to_disk(str(src / "ds"))

    def build(name, paths=(), hf_datasets=()):
        cfg = kit.release_config(list(paths), clean=True, dedup=True, shard_max_bytes=1 << 16)
        cfg = cfg.replace("[inputs]\n", "[inputs]\nhf_datasets = %s\n" % json.dumps(list(hf_datasets)))
        (tmp / f"{name}.toml").write_text(cfg)
        kit.run_grist("build", "--config", tmp / f"{name}.toml", "--output", tmp / name, "--quiet")
        kit.run_grist("verify", tmp / name)
        return tmp / name

    from_jsonl = build("rel-jsonl", [str(src / "rows.jsonl")])
    from_parquet = build("rel-parquet", [str(src / "rows.parquet")])
    from_dataset = build("rel-dataset", hf_datasets=[f"{src / 'ds'}:train"])
    want = release_bytes(from_jsonl)
    assert any(p.startswith("shards") for p in want)
    assert release_bytes(from_parquet) == want
    assert release_bytes(from_dataset) == want
    mj, mp, md = (kit.manifest(r) for r in (from_jsonl, from_parquet, from_dataset))
    for m in (mj, mp, md):  # the intermediate records' bytes carry the input's path (provenance)
        del m["counts"]["tokenize"]["bytes_in"]
    assert mj["counts"] == mp["counts"] == md["counts"]
    assert mj["counts"]["total"]["documents_in"] == 300
    assert [i["path"] for i in mp["inputs"]] == [str(src / "rows.parquet")]
    assert [i["path"] for i in md["inputs"]] == [f"hf-dataset:{src / 'ds'}:train"]


def test_clean_reads_a_saved_dataset(corpus, tmp_path):
    import datasets
    datasets.disable_progress_bars()
    tmp, files, texts, ids = corpus
    table = pq.read_table(files[1])  # 703 rows, the last without text
    datasets.DatasetDict({"train": datasets.Dataset.from_dict(table.slice(0, 600).to_pydict()),
                          "validation": datasets.Dataset.from_dict(table.slice(600).to_pydict())}
                         ).save_to_disk(
        str(tmp_path / "ds"))
    for spec, rows in ((str(tmp_path / "ds"), 600), (f"{tmp_path / 'ds'}:validation", 103)):
        out = tmp_path / f"clean-{rows}"
        kit.run_grist("clean", "--hf-dataset", spec, "--output", out, "--quiet",
                      "--json", tmp_path / f"{rows}.json")
        rep = json.load(open(tmp_path / f"{rows}.json"))
        assert rep["docs"]["in"] == rows
        kept, rejected = kept_and_rejected(out)
        assert len(kept) + len(rejected) == rows
        source = f"hf-dataset:{spec}"
        assert {r["grist"]["src"] for r in kept} == {source}
    # validation's last row has no text: rejected, named by dataset and row.
    assert [r["error"] for r in rejected if "bad_record" in r["reasons"]] == [
        f"hf-dataset:{tmp_path / 'ds'}:validation:103: text field 'text' is not a string"]
    p = kit.run_grist("clean", "--hf-dataset", f"{tmp_path / 'ds'}:test", "--output",
                      tmp_path / "o", "--quiet", check=False)
    assert p.returncode == 1 and "no split 'test' (splits: train, validation)" in p.stderr
