#!/usr/bin/env bash
# Assembles grist's embedded default corpus (about 15 MB of real text) from public-domain and
# freely licensed texts that Debian packages install (scripts/setup.sh installs them):
#
#   DIR/bible-kjv.jsonl.zst   King James Bible (bible-kjv), one document per chapter
#   DIR/fortunes.jsonl.zst    fortune cookies in English, German, Spanish, Italian (fortunes*),
#                             one document per fortune (most are short: the quality filters reject
#                             them, which the demo shows)
#   DIR/gcide.jsonl.zst       GNU Collaborative International Dictionary of English (dict-gcide),
#                             one document per entry, the first ~3 MB of entries
#   DIR/licenses/*.txt        /usr/share/common-licenses (GPL/LGPL versions: near duplicates)
#   DIR/copyrights/*.txt      /usr/share/doc/*/copyright, in package-name order, up to ~3 MB
#                             (many exact and near duplicates)
#
# Deterministic: inputs are walked in sorted order, JSON is written with sorted keys, zstd output
# carries no timestamps. Copyright files are taken only for the packages scripts/setup.sh installs,
# so the corpus does not depend on what else a machine has installed.
#
# Usage: scripts/make_demo_corpus.sh DIR
set -euo pipefail
# The packages whose copyright files the corpus takes: setup.sh's PACKAGES list as bash itself
# reads it (the lines from "PACKAGES=(" to the first line that is ")"), one a line.
packages() {
  bash -c 'eval "$(sed -n "/^PACKAGES=(/,/^)/p" "$1")"; printf "%s\n" "${PACKAGES[@]}"' _ \
    "$(dirname "$0")/setup.sh" | sort -u
}
if [[ $# -eq 1 && $1 == --packages ]]; then
  packages
  exit 0
fi
if [[ $# -ne 1 ]]; then
  echo "usage: $0 DIR   (or $0 --packages: the packages whose copyright files it takes)" >&2
  exit 2
fi
OUT=$1
for tool in bible zstd /usr/bin/python3; do
  if ! command -v "$tool" >/dev/null; then
    echo "make_demo_corpus: '$tool' is missing; run scripts/setup.sh first" >&2
    exit 1
  fi
done
for f in /usr/share/games/fortunes /usr/share/dictd/gcide.dict.dz /usr/share/dictd/gcide.index \
         /usr/share/common-licenses; do
  if [[ ! -e $f ]]; then
    echo "make_demo_corpus: $f is missing; run scripts/setup.sh first" >&2
    exit 1
  fi
done

rm -rf "$OUT.tmp"
mkdir -p "$OUT.tmp/licenses" "$OUT.tmp/copyrights"
export LC_ALL=C

bible -m 8192 "Gen1:1-Rev22:21" >"$OUT.tmp/kjv.raw"

/usr/bin/python3 - "$OUT.tmp" "$(packages)" <<'PY'
import glob, gzip, json, os, re, sys

out = sys.argv[1]

def write_jsonl(name, records):
    with open(os.path.join(out, name), "w", encoding="utf-8", newline="\n") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")

# King James Bible: "Book N" headers, then "  V text" verses wrapped over several lines.
chapters, title, verses = [], None, []
def flush():
    if title and verses:
        chapters.append({"id": "kjv/" + title, "title": title, "text": "\n".join(verses)})
with open(os.path.join(out, "kjv.raw"), encoding="utf-8", errors="replace") as f:
    for line in f:
        line = line.rstrip("\n")
        if not line.strip():
            continue
        m = re.match(r"^\s+(\d+) (.*)$", line)
        if m:
            verses.append(m.group(2).strip())
        elif re.match(r"^\S.* \d+$", line):
            flush()
            title, verses = line.strip(), []
        elif verses:
            verses[-1] += " " + line.strip()
flush()
os.remove(os.path.join(out, "kjv.raw"))
write_jsonl("bible-kjv.jsonl", chapters)

# Fortunes: every file (not .dat; the UTF-8 .u8 variant where present), "%" lines separate them.
root = "/usr/share/games/fortunes"
fortunes = []
for dirpath, dirnames, filenames in sorted(os.walk(root)):
    dirnames[:] = sorted(d for d in dirnames if d != "off")
    names = set(filenames)
    for n in sorted(filenames):
        if n.endswith(".dat") or (n.endswith(".u8") and n[:-3] in names) or os.path.islink(os.path.join(dirpath, n)):
            continue
        path = os.path.join(dirpath, n + ".u8" if n + ".u8" in names else n)
        rel = os.path.relpath(os.path.join(dirpath, n), root)
        with open(path, "rb") as f:
            data = f.read().decode("utf-8", errors="replace")
        for i, chunk in enumerate(re.split(r"\n%\n", data)):
            text = chunk.strip("\n%")
            if text.strip():
                fortunes.append({"id": "fortunes/%s/%d" % (rel, i), "text": text})
write_jsonl("fortunes.jsonl", fortunes)

# GCIDE: entries located by the dictd index (headword, base64 offset, base64 length).
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
def b64(s):
    v = 0
    for ch in s:
        v = v * 64 + B64.index(ch)
    return v
with gzip.open("/usr/share/dictd/gcide.dict.dz", "rb") as f:
    dict_data = f.read()
entries = []
with open("/usr/share/dictd/gcide.index", encoding="utf-8", errors="replace") as f:
    for line in f:
        parts = line.rstrip("\n").split("\t")
        if len(parts) < 3 or parts[0].startswith("00-database"):
            continue
        entries.append((b64(parts[1]), b64(parts[2]), parts[0]))
entries.sort()
seen, records, total = set(), [], 0
for off, length, word in entries:
    if off in seen:
        continue
    seen.add(off)
    text = dict_data[off:off + length].decode("utf-8", errors="replace")
    records.append({"id": "gcide/" + word, "title": word, "text": text})
    total += length
    if total > 3_000_000:
        break
write_jsonl("gcide.jsonl", records)

# Licenses and per-package copyright files, as one-document .txt files.
for path in sorted(glob.glob("/usr/share/common-licenses/*")):
    if os.path.isfile(path):
        with open(path, "rb") as f, open(os.path.join(out, "licenses", os.path.basename(path) + ".txt"), "wb") as g:
            g.write(f.read())
# Only the packages of setup.sh's PACKAGES list (the shell's `packages`), so the corpus (and the
# release id) is the same on every Debian 12 machine that ran it, whatever else is installed there.
packages = sorted(set(sys.argv[2].split()))
total = 0
for path in [f"/usr/share/doc/{p}/copyright" for p in packages]:
    if not os.path.isfile(path) or total > 3_000_000:
        continue
    with open(path, "rb") as f:
        data = f.read()
    total += len(data)
    name = os.path.basename(os.path.dirname(path)) + ".txt"
    with open(os.path.join(out, "copyrights", name), "wb") as g:
        g.write(data)
print("make_demo_corpus: %d chapters, %d fortunes, %d dictionary entries" % (len(chapters), len(fortunes), len(records)))
PY

for f in "$OUT.tmp"/*.jsonl; do
  zstd -q -T1 -3 --rm -f "$f" -o "$f.zst"
done
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
echo "make_demo_corpus: $(du -sh --apparent-size "$OUT" | cut -f1) in $OUT ($(find "$OUT" -type f | wc -l) files)"
