"""A parser of grist_capi.h's restricted declaration style (the header's opening comment states it),
for test_capi_header.py: what the header declares, and the ctypes type each declaration needs.

The parser reads exactly the forms the header allows and raises HeaderError on anything else, so
a declaration it cannot check is an error, not a silent pass:

    typedef struct name name;                             an opaque handle
    typedef struct name { <type> <field>; ... } name;     a struct
    typedef enum name { NAME = <int>, ... } name;         an enum (every value explicit)
    GRIST_CAPI_EXPORT <type> <name>(<type> <arg>, ...);   a function; (void) for none
    #define GRIST_CAPI_ABI_VERSION <int>

Comments (/* */ and //) and the other preprocessor lines are dropped first, as is the extern "C"
wrapper. A <type> is a scalar, a typedef of the header, or `char`/`void`, with `const` anywhere and
any number of `*`.
"""

import ctypes
import re


class HeaderError(ValueError):
    pass


SCALARS = {
    "int": ctypes.c_int, "int32_t": ctypes.c_int32, "uint32_t": ctypes.c_uint32,
    "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64, "double": ctypes.c_double,
    "size_t": ctypes.c_size_t, "uintptr_t": ctypes.c_size_t,
}
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


class Type:
    """A C type of the header: base name, pointer depth and its spelling (without spaces)."""

    def __init__(self, text):
        self.text = re.sub(r"\s+", " ", text.strip())
        words = re.findall(_IDENT + r"|\*", self.text)
        self.depth = words.count("*")
        bases = [w for w in words if w not in ("const", "*")]
        if len(bases) != 1:
            raise HeaderError(f"cannot read the type '{text}'")
        self.base = bases[0]

    def spelling(self):
        """The type with every space removed ("constchar*const*"): compares with clang's."""
        return self.text.replace(" ", "")

    def __str__(self):
        return self.text


class Header:
    def __init__(self):
        self.abi_version = None
        self.handles = []          # opaque struct names, in order
        self.structs = {}          # name -> [(field, Type)]
        self.enums = {}            # name -> [(NAME, value)]
        self.functions = {}        # name -> (Type, [(arg, Type)])

    def ctype(self, t, where):
        """The ctypes type a value of C type `t` travels as (None for void)."""
        b, d = t.base, t.depth
        if d == 0:
            if b == "void":
                return None
            if b in SCALARS:
                return SCALARS[b]
            if b in self.enums:
                return ctypes.c_int
            raise HeaderError(f"{where}: '{t}' by value is outside the header's style")
        if d == 1:
            if b == "char":
                return ctypes.c_char_p
            if b == "void" or b in self.handles:
                return ctypes.c_void_p
            if b in self.structs:
                raise _NeedsStruct(b)
            if b in SCALARS:
                return ctypes.POINTER(SCALARS[b])
        if d == 2:
            if b == "char":
                return ctypes.POINTER(ctypes.c_char_p)
            if b == "void" or b in self.handles:
                return ctypes.POINTER(ctypes.c_void_p)
        raise HeaderError(f"{where}: no ctypes rule for '{t}'")


class _NeedsStruct(Exception):
    """A pointer to a struct: its ctypes type is POINTER(the Python Structure of that name)."""

    def __init__(self, name):
        super().__init__(name)
        self.name = name


def expected_ctype(header, t, where, structs):
    """header.ctype, with a pointer to a struct resolved through `structs` (name -> Structure)."""
    try:
        return header.ctype(t, where)
    except _NeedsStruct as s:
        if s.name not in structs:
            raise HeaderError(f"{where}: no Python Structure for struct {s.name}") from None
        return ctypes.POINTER(structs[s.name])


def _strip(text):
    m = re.search(r"#define\s+GRIST_CAPI_ABI_VERSION\s+(\d+)", text)
    version = int(m.group(1)) if m else None
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    lines = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#") or s in ('extern "C" {', "}"):
            continue
        lines.append(line)
    return "\n".join(lines), version


def _statements(text):
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth < 0:
                raise HeaderError("unbalanced '}'")
        if ch == ";" and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        raise HeaderError(f"text after the last declaration: {''.join(cur).strip()[:80]!r}")
    return [s for s in out if s]


def _split_decl(decl, where):
    """'const char* const* paths' -> ('paths', Type('const char* const*'))."""
    m = re.match(r"^(.*?)(" + _IDENT + r")\s*$", decl.strip(), re.S)
    if not m or not m.group(1).strip():
        raise HeaderError(f"{where}: cannot read the declaration '{decl.strip()}'")
    return m.group(2), Type(m.group(1))


def parse(text):
    """The Header that `text` (grist_capi.h) declares; HeaderError names the first statement the
    restricted style does not allow."""
    body, version = _strip(text)
    h = Header()
    h.abi_version = version
    for st in _statements(body):
        flat = re.sub(r"\s+", " ", st)
        m = re.fullmatch(r"typedef struct (" + _IDENT + r") (" + _IDENT + r")", flat)
        if m:
            if m.group(1) != m.group(2):
                raise HeaderError(f"handle typedef names differ: {flat}")
            h.handles.append(m.group(1))
            continue
        m = re.fullmatch(r"typedef struct (" + _IDENT + r") ?\{(.*)\} ?(" + _IDENT + r")", flat)
        if m:
            name, fields = m.group(1), []
            if m.group(3) != name:
                raise HeaderError(f"struct typedef names differ: {name} / {m.group(3)}")
            for f in m.group(2).split(";"):
                if f.strip():
                    fields.append(_split_decl(f, f"{name} field"))
            h.structs[name] = fields
            continue
        m = re.fullmatch(r"typedef enum (" + _IDENT + r") ?\{(.*)\} ?(" + _IDENT + r")", flat)
        if m:
            name, members = m.group(1), []
            if m.group(3) != name:
                raise HeaderError(f"enum typedef names differ: {name} / {m.group(3)}")
            for e in m.group(2).split(","):
                em = re.fullmatch(r"\s*(" + _IDENT + r")\s*=\s*(-?\d+)\s*", e)
                if not em:
                    raise HeaderError(f"enum {name}: '{e.strip()}' needs an explicit value")
                members.append((em.group(1), int(em.group(2))))
            h.enums[name] = members
            continue
        m = re.fullmatch(r"GRIST_CAPI_EXPORT (.*?)(" + _IDENT + r") ?\((.*)\)", flat)
        if m:
            ret, name, params = Type(m.group(1)), m.group(2), m.group(3).strip()
            args = []
            if params != "void":
                for i, p in enumerate(params.split(",")):
                    if "(" in p:
                        raise HeaderError(f"{name}: function pointer parameters are outside the style")
                    args.append(_split_decl(p, f"{name} argument {i}"))
            if name in h.functions:
                raise HeaderError(f"{name} declared twice")
            h.functions[name] = (ret, args)
            continue
        raise HeaderError(f"a statement outside the header's style: {flat[:120]!r}")
    return h
