"""datatrove's FineWeb quality filters as grist's clean stage configures them, for the clean
benchmark's peer and the agreement report (clean_agreement.py).

The four filters are datatrove's own classes, constructed with the thresholds grist uses by default
(docs/clean.md): GopherRepetitionFilter(), GopherQualityFilter(), C4QualityFilter with
filter_no_terminal_punct=False (FineWeb's setting) and FineWebQualityFilter(). Their `filter(doc)`
method is what datatrove's pipeline calls per document; it returns True or (False, reason).
"""

import functools
import importlib

FILTERS = ("gopher_repetition", "gopher_quality", "c4", "fineweb")

# The modules whose `split_into_words` the filters call (patched for memoizing or substituting).
_WORD_MODULES = (
    "datatrove.pipeline.filters.gopher_repetition_filter",
    "datatrove.pipeline.filters.gopher_quality_filter",
    "datatrove.pipeline.filters.fineweb_quality_filter",
)


def versions():
    import datatrove
    out = {"datatrove": getattr(datatrove, "__version__", "?")}
    try:
        import spacy
        out["spacy"] = spacy.__version__
    except ImportError:
        out["spacy"] = "absent"
    try:
        from importlib.metadata import version
        out["datatrove"] = version("datatrove")
    except Exception:  # noqa: BLE001 - metadata lookups are best effort
        pass
    return out


def make_filters():
    """The four filters, by grist's filter names, in FineWeb's order."""
    from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter,
                                            GopherQualityFilter, GopherRepetitionFilter)
    return {
        "gopher_repetition": GopherRepetitionFilter(),
        "gopher_quality": GopherQualityFilter(),
        "c4": C4QualityFilter(filter_no_terminal_punct=False),
        "fineweb": FineWebQualityFilter(),
    }


def verdict(flt, text, doc_id="0"):
    """'keep' or the reason datatrove gives, for `text` alone (a fresh Document: C4 edits it)."""
    from datatrove.data import Document
    doc = Document(text=text, id=doc_id)
    r = flt.filter(doc)
    if r is True or (isinstance(r, tuple) and r[0]):
        return "keep", doc.text
    if isinstance(r, tuple):
        return r[1], doc.text
    return "reject", doc.text


def pipeline(filters, text, doc_id="0"):
    """The FineWeb pipeline order: 'keep' or the first failing filter's reason (C4's edited text
    goes on to FineWeb, as in datatrove)."""
    from datatrove.data import Document
    doc = Document(text=text, id=doc_id)
    for name in FILTERS:
        r = filters[name].filter(doc)
        if not (r is True or (isinstance(r, tuple) and r[0])):
            return r[1] if isinstance(r, tuple) else "reject"
    return "keep"


def set_word_splitter(fn):
    """Makes the filters split words with fn(text, language) (None: datatrove's own, memoized on
    the last text, which gives the same words: the filters of one document share its text)."""
    from datatrove.utils import text as dt_text
    if fn is None:
        fn = _memoized(dt_text.split_into_words)
    for m in _WORD_MODULES:
        importlib.import_module(m).split_into_words = fn


def _memoized(split):
    last = {}

    @functools.wraps(split)
    def wrapper(text, language="en"):
        key = (text, language)
        if key not in last:
            last.clear()
            last[key] = split(text, language)
        return list(last[key])

    return wrapper


def restore_word_splitter():
    from datatrove.utils import text as dt_text
    for m in _WORD_MODULES:
        importlib.import_module(m).split_into_words = dt_text.split_into_words
