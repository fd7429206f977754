"""Hugging Face datasets and Parquet files as grist input: the stages' Python reader, and a
streaming converter to JSON Lines.

Debian 12 has no Arrow C++ development package, so Parquet and the Hub come in through pyarrow /
`datasets` here: read by grist's stages directly (records mode, below), or converted once to a JSONL
file that every stage reads:

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

The record reader of grist's stages (`grist clean --input data.parquet`, `--hf-dataset NAME[:split]`,
`inputs.hf_datasets` of `grist build`) runs this file as a child process in its records mode, which
streams every row of one source to standard output as one JSON object per line, nothing skipped:

    python hf.py --records parquet data.parquet --text-field text
    python hf.py --records hf-dataset NAME[:split] --text-field text

Line N is row N (1-based, in file order: row groups in order, rows in order), each object holds every
column of the row in schema order (values JSON has no type for are written as their str()), so the
reader names a bad row by its source and row. A missing text column, a missing pyarrow / datasets
module or an unreadable source is one line "grist.hf: SOURCE: ..." on standard error and exit status 1
before or instead of more rows. records(...) is the Python API.
"""

import argparse
import json
import os
import sys

__all__ = ["convert", "records", "main"]


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


class SourceError(Exception):
    """A source that cannot be read as records: the message names the source."""


def _need(module, source, what):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as e:
        raise SourceError(f"{source}: reading {what} needs the Python module {module.split('.')[0]!r} "
                          f"({e}); install it (pip install -r requirements.txt) or set GRIST_PYTHON "
                          f"to a Python that has it") from None


def split_dataset_spec(spec):
    """'NAME[:split]' -> (NAME, split or None). A Hub name holds no ':'; a local folder may, so the
    split is what follows the last ':' only when that is a plain split name."""
    name, sep, split = spec.rpartition(":")
    if sep and name and split and all(c.isalnum() or c in "_-.[]%+" for c in split):
        return name, split
    return spec, None


def _dataset_rows(spec, text_field):
    """Every row of the dataset `spec` ('NAME[:split]', a Hub name or a local folder: one written by
    Dataset/DatasetDict.save_to_disk is loaded with load_from_disk, anything else with
    load_dataset(NAME, split=split or 'train', streaming=True)), as dicts, in dataset order."""
    datasets = _need("datasets", spec, "a Hugging Face dataset")
    try:
        datasets.disable_progress_bars()
    except AttributeError:
        pass
    name, split = split_dataset_spec(spec)
    if os.path.isdir(name) and (os.path.exists(os.path.join(name, "state.json")) or
                                os.path.exists(os.path.join(name, "dataset_dict.json"))):
        ds = datasets.load_from_disk(name)
        if isinstance(ds, datasets.DatasetDict):
            want = split or "train"
            if want not in ds:
                raise SourceError(f"{spec}: no split {want!r} (splits: {', '.join(ds)})")
            ds = ds[want]
        elif split is not None and ds.split is not None and str(ds.split) != split:
            raise SourceError(f"{spec}: the dataset saved there is split {str(ds.split)!r}")
    else:
        ds = datasets.load_dataset(name, split=split or "train", streaming=True)
    names = list(ds.column_names) if ds.column_names is not None else None
    if text_field and names is not None and text_field not in names:
        raise SourceError(f"{spec}: no column {text_field!r} (columns: {', '.join(names)})")
    for i, row in enumerate(ds):
        if i == 0 and text_field and names is None and text_field not in row:
            raise SourceError(f"{spec}: no column {text_field!r} (columns: {', '.join(row)})")
        yield row


def _parquet_all_rows(path, text_field, batch_rows=1024):
    pq = _need("pyarrow.parquet", path, "Parquet")
    try:
        f = pq.ParquetFile(path)
    except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
        raise SourceError(f"{path}: not a readable Parquet file ({e})") from None
    names = f.schema_arrow.names
    if text_field and text_field not in names:
        raise SourceError(f"{path}: no column {text_field!r} (columns: {', '.join(names)})")
    for batch in f.iter_batches(batch_size=batch_rows):
        yield from batch.to_pylist()


def records(kind, source, out, text_field="text"):
    """Writes every row of `source` to the binary stream `out` as JSON Lines, row N on line N.
    kind: "parquet" (a Parquet file) or "hf-dataset" ('NAME[:split]'). A source without the column
    `text_field` ("" checks none) or that cannot be read raises SourceError naming the source.
    Returns the number of rows."""
    if kind == "parquet":
        rows = _parquet_all_rows(source, text_field)
    elif kind == "hf-dataset":
        rows = _dataset_rows(source, text_field)
    else:
        raise SourceError(f"{source}: unknown source kind {kind!r} (parquet, hf-dataset)")
    n = 0
    buf = []
    for row in rows:
        buf.append(json.dumps(row, ensure_ascii=False, default=str))
        n += 1
        if len(buf) == 256:
            out.write(("\n".join(buf) + "\n").encode("utf-8", "surrogatepass"))
            buf.clear()
    if buf:
        out.write(("\n".join(buf) + "\n").encode("utf-8", "surrogatepass"))
    out.flush()
    return n


def _records_main(kind, source, text_field):
    try:
        records(kind, source, sys.stdout.buffer, text_field)
    except SourceError as e:
        print(f"grist.hf: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader stopped early
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as e:  # anything else the libraries raise: one line naming the source
        print(f"grist.hf: {source}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


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
    p.add_argument("--output", help="the JSONL file to write")
    p.add_argument("--records", nargs=2, metavar=("KIND", "SOURCE"),
                   help="stream every row of SOURCE (KIND parquet: a file; hf-dataset: "
                        "NAME[:split]) to standard output, row N on line N (grist's record reader)")
    a = p.parse_args(argv)
    if a.records:
        return _records_main(a.records[0], a.records[1], a.text_field)
    if not a.output:
        p.error("--output is required")
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
