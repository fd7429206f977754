"""Hugging Face datasets and Parquet files as grist input: a streaming converter to JSON Lines.

grist's C++ stages read JSON Lines, plain text, gzip and zstd (docs/formats/documents.md); Debian 12
has no Arrow C++ development package, so Parquet and the Hub come in through pyarrow / `datasets`
here, streamed to a JSONL file that `grist clean`, `grist build` (inputs.paths) and every other
stage read:

    python -m grist.hf data/*.parquet --output corpus/data.jsonl
    python -m grist.hf --hf-dataset allenai/c4 --config en --split validation \\
        --output corpus/c4-validation.jsonl --limit 100000
    grist clean --input corpus --output cleaned

Each output line is {"text": ..., "id": ..., <--keep columns>...}: `id` is the --id-field column
when given, else "<source>:<row>" (the Parquet path, or NAME/SPLIT, and the 0-based row number), so
grist's records (which keep every non-text member in `meta`) trace back to the source row. Rows
whose text is null or not a string are skipped and counted. Output is written to OUTPUT.tmp and
renamed at the end: a partial conversion never looks complete. Deterministic: the same input gives
the same bytes. Python API: `convert(...)` returns the counts.
"""

import argparse
import json
import os
import sys

__all__ = ["convert", "main"]


def _parquet_rows(path, columns, batch_rows):
    import pyarrow.parquet as pq

    f = pq.ParquetFile(path)
    names = f.schema_arrow.names
    missing = [c for c in columns if c not in names]
    if missing:
        raise ValueError(f"{path}: no column {missing[0]!r} (columns: {', '.join(names)})")
    for batch in f.iter_batches(batch_size=batch_rows, columns=columns):
        yield from batch.to_pylist()


def _hf_rows(name, config, split, revision, columns, streaming):
    import datasets

    ds = datasets.load_dataset(name, config, split=split, revision=revision, streaming=streaming)
    names = list(ds.column_names) if ds.column_names is not None else None
    if names is not None:
        missing = [c for c in columns if c not in names]
        if missing:
            raise ValueError(f"{name} ({split}): no column {missing[0]!r} "
                             f"(columns: {', '.join(names)})")
    for i, row in enumerate(ds):
        if i == 0 and names is None:  # a streamed dataset names its columns with its rows
            missing = [c for c in columns if c not in row]
            if missing:
                raise ValueError(f"{name} ({split}): no column {missing[0]!r} "
                                 f"(columns: {', '.join(row)})")
        yield {c: row.get(c) for c in columns}


def _jsonable(v):
    if v is None or isinstance(v, (str, int, float, bool, list, dict)):
        return v
    return str(v)


def convert(inputs=(), output=None, hf_dataset=None, config=None, split="train", revision=None,
            text_field="text", id_field=None, keep=(), limit=None, streaming=True,
            batch_rows=1024):
    """Converts Parquet files `inputs` (in order), or the Hugging Face dataset `hf_dataset`
    (name or local folder, loaded with datasets.load_dataset(hf_dataset, config, split=split)), to
    the JSONL file `output`. Returns {"rows", "written", "skipped_no_text"}."""
    if output is None:
        raise ValueError("output is required")
    if bool(inputs) == bool(hf_dataset):
        raise ValueError("give Parquet inputs or hf_dataset, not both (and at least one)")
    columns = [text_field] + ([id_field] if id_field else []) + [c for c in keep]
    if len(set(columns)) != len(columns):
        raise ValueError(f"columns named twice: {columns}")
    if hf_dataset:
        sources = [(f"{hf_dataset}/{split}",
                    _hf_rows(hf_dataset, config, split, revision, columns, streaming))]
    else:
        sources = [(p, _parquet_rows(p, columns, batch_rows)) for p in inputs]
    counts = {"rows": 0, "written": 0, "skipped_no_text": 0}
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    tmp = output + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as out:
            for source, rows in sources:
                for i, row in enumerate(rows):
                    if limit is not None and counts["rows"] >= limit:
                        break
                    counts["rows"] += 1
                    text = row.get(text_field)
                    if not isinstance(text, str):
                        counts["skipped_no_text"] += 1
                        continue
                    rec = {"text": text}
                    rec["id"] = str(row[id_field]) if id_field else f"{source}:{i}"
                    for c in keep:
                        rec[c] = _jsonable(row.get(c))
                    out.write(json.dumps(rec, ensure_ascii=False) + "\n")
                    counts["written"] += 1
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, output)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return counts


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m grist.hf",
        description="Convert Parquet files or a Hugging Face dataset to JSON Lines for grist.")
    p.add_argument("inputs", nargs="*", help="Parquet files, converted in the order given")
    p.add_argument("--hf-dataset", metavar="NAME",
                   help="a Hugging Face dataset (Hub name or local folder) instead of Parquet files")
    p.add_argument("--config", help="the dataset's configuration (subset) name")
    p.add_argument("--split", default="train", help="the dataset split (default train)")
    p.add_argument("--revision", help="the dataset revision (branch, tag or commit)")
    p.add_argument("--no-streaming", action="store_true",
                   help="download and prepare the dataset instead of streaming it")
    p.add_argument("--text-field", default="text", help="the column holding the text")
    p.add_argument("--id-field", help="a column to use as each record's id")
    p.add_argument("--keep", action="append", default=[], metavar="COLUMN",
                   help="also copy this column into each record (repeatable)")
    p.add_argument("--limit", type=int, help="stop after this many rows")
    p.add_argument("--output", required=True, help="the JSONL file to write")
    a = p.parse_args(argv)
    try:
        counts = convert(a.inputs, a.output, hf_dataset=a.hf_dataset, config=a.config,
                         split=a.split, revision=a.revision, text_field=a.text_field,
                         id_field=a.id_field, keep=a.keep, limit=a.limit,
                         streaming=not a.no_streaming)
    except (ValueError, OSError) as e:
        print(f"grist.hf: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"output": a.output, **counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
