"""The Python declarations of the C ABI agree with its one home, python/capi/grist_capi.h.

grist._capi mirrors the header for ctypes; these tests parse the header (capi_header.py, a parser
of its restricted style; cross-checked with clang's AST where clang is installed) and compare every
function's restype and argtypes, every struct's fields and every enum's members with the mirror,
with the functions the grist modules actually hold on the loaded library (so a module that declares
or redeclares a function on its own is caught), and with the symbols libgrist_capi.so exports. A
mismatch names the function, the argument or field, and both types.
"""

import ctypes
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HEADER = os.path.join(ROOT, "python", "capi", "grist_capi.h")
sys.path.insert(0, HERE)

import capi_header  # noqa: E402
from grist import _capi  # noqa: E402
from grist._native import lib  # noqa: E402


@pytest.fixture(scope="module")
def header():
    with open(HEADER, encoding="utf-8") as f:
        return capi_header.parse(f.read())


def _name(t):
    return "void" if t is None else t.__name__


def _expected(header, t, where):
    return capi_header.expected_ctype(header, t, where, _capi.STRUCTS)


def _mismatches(header, name, restype, argtypes):
    """What differs between the header's declaration of `name` and (restype, argtypes)."""
    ret, args = header.functions[name]
    out = []
    want = _expected(header, ret, f"{name} result")
    if want is not restype:
        out.append(f"{name}: the header returns '{ret}' ({_name(want)}), Python's restype is "
                   f"{_name(restype)}")
    if argtypes is None:
        return out + [f"{name}: Python sets no argtypes (the header has {len(args)} arguments)"]
    if len(argtypes) != len(args):
        out.append(f"{name}: the header has {len(args)} arguments "
                   f"({', '.join(a for a, _ in args)}), Python's argtypes {len(argtypes)}")
    for i, ((arg, t), got) in enumerate(zip(args, argtypes)):
        want = _expected(header, t, f"{name} argument {i}")
        if want is not got:
            out.append(f"{name} argument {i} ({arg}): the header has '{t}' ({_name(want)}), "
                       f"Python {_name(got)}")
    return out


def test_parser_reads_the_whole_header(header):
    assert header.abi_version is not None
    assert len(header.functions) >= 50
    assert "grist_loader_open" in header.functions
    assert header.structs["grist_loader_options"][0][0] == "struct_size"


def test_parser_refuses_what_it_cannot_check():
    for text in ("GRIST_CAPI_EXPORT int f(int (*cb)(int));",
                 "typedef enum e { A, B } e;",
                 "struct s { int a; };",
                 "typedef struct a b;",
                 "GRIST_CAPI_EXPORT int f(int x)"):
        with pytest.raises(capi_header.HeaderError):
            capi_header.parse(text)


def test_abi_version(header):
    assert header.abi_version == _capi.ABI_VERSION == lib.grist_capi_abi_version()


def test_every_function_is_declared_as_the_header_says(header):
    problems = []
    for name in header.functions:
        if name not in _capi.FUNCTIONS:
            problems.append(f"{name}: in the header, missing from grist/_capi.py")
            continue
        problems += _mismatches(header, name, *_capi.FUNCTIONS[name])
    for name in _capi.FUNCTIONS:
        if name not in header.functions:
            problems.append(f"{name}: declared in grist/_capi.py, not in grist_capi.h")
    assert not problems, "\n".join(problems)


def test_the_library_functions_python_uses_match_the_header(header):
    # Every grist module imported: whatever they declared on `lib` is what calls will use.
    import grist.ckpt  # noqa: F401
    import grist.data  # noqa: F401
    import grist.loader  # noqa: F401
    try:
        import grist.ckpt_dcp  # noqa: F401
    except ImportError:
        pass
    problems = []
    used = {k: v for k, v in vars(lib).items()
            if k.startswith("grist_") and isinstance(v, ctypes._CFuncPtr)}  # not a test's stand-in
    for name, f in used.items():
        if name not in header.functions:
            problems.append(f"{name}: used from Python but not declared in grist_capi.h")
            continue
        problems += _mismatches(header, name, f.restype, f.argtypes)
    missing = sorted(set(header.functions) - set(used))
    assert not missing, f"declared in the header, never set up on the library: {missing}"
    assert not problems, "\n".join(problems)


def test_structs_match_field_by_field(header):
    problems = []
    for name, fields in header.structs.items():
        py = _capi.STRUCTS.get(name)
        if py is None:
            problems.append(f"struct {name}: no Structure in grist/_capi.py STRUCTS")
            continue
        got = py._fields_
        if [f for f, _ in got] != [f for f, _ in fields]:
            problems.append(f"struct {name}: the header's fields are {[f for f, _ in fields]}, "
                            f"{py.__name__}'s {[f for f, _ in got]}")
            continue
        for (field, t), (_, pt) in zip(fields, got):
            want = _expected(header, t, f"{name}.{field}")
            if want is not pt:
                problems.append(f"struct {name}.{field}: the header has '{t}' ({_name(want)}), "
                                f"{py.__name__} {_name(pt)}")
    for name in _capi.STRUCTS:
        if name not in header.structs:
            problems.append(f"struct {name}: in grist/_capi.py, not in the header")
    assert not problems, "\n".join(problems)


def test_struct_sizes_are_the_library_s(tmp_path):
    # Each _init function stores the library's sizeof in struct_size.
    for name, init in (("grist_loader_options", "grist_loader_options_init"),
                       ("grist_synthetic_release_options", "grist_synthetic_release_options_init"),
                       ("grist_ckpt_writer_options", "grist_ckpt_writer_options_init")):
        st = _capi.STRUCTS[name]
        o = _capi.new_options(lib, st, init)
        assert o.struct_size == ctypes.sizeof(st), name
    # grist_loader_info has no _init: a wrong size is refused, naming the library's size.
    from grist.loader import Loader, write_synthetic_release
    write_synthetic_release(tmp_path / "rel", samples=16, seq_len=8, samples_per_shard=8)
    with Loader(str(tmp_path / "rel"), micro_batch_size=2, global_batch_size=4) as loader:
        info = _capi.LoaderInfo(struct_size=ctypes.sizeof(_capi.LoaderInfo) + 8)
        rc = lib.grist_loader_get_info(loader._h(), ctypes.byref(info))
        assert rc == -_capi.Status.INVALID_ARGUMENT
        msg = lib.grist_last_error().decode()
        assert f"this library's is {ctypes.sizeof(_capi.LoaderInfo)} " in msg, msg


def test_enums_match(header):
    problems = []
    for name, members in header.enums.items():
        if name == "grist_ckpt_dtype":
            continue  # Python reads the names from the library: test_dtype_names
        if name not in _capi.ENUMS:
            problems.append(f"enum {name}: not mirrored in grist/_capi.py ENUMS")
            continue
        py, prefix = _capi.ENUMS[name]
        want = {m[len(prefix):]: v for m, v in members}
        got = {m.name: int(m.value) for m in py}
        if want != got:
            problems.append(f"enum {name}: the header has {want}, {py.__name__} {got}")
    assert not problems, "\n".join(problems)


def test_status_names_come_from_the_library(header):
    for member, value in header.enums["grist_status"]:
        assert lib.grist_status_name(value).decode() == member[len("GRIST_"):]
        assert lib.grist_status_name(-value).decode() == member[len("GRIST_"):]


def test_dtype_names(header):
    import grist.ckpt as ckpt
    members = header.enums["grist_ckpt_dtype"]
    codes = [(m[len("GRIST_DTYPE_"):], v) for m, v in members if m != "GRIST_DTYPE_COUNT"]
    assert [v for _, v in codes] == list(range(len(codes)))
    assert dict(members)["GRIST_DTYPE_COUNT"] == len(codes) == lib.grist_ckpt_num_dtypes()
    assert ckpt._DTYPE_NAMES == [n for n, _ in codes]
    out = ctypes.c_char_p()
    assert lib.grist_ckpt_dtype_name(len(codes), ctypes.byref(out)) == -_capi.Status.OUT_OF_RANGE


def test_handles_match(header):
    assert list(_capi.HANDLES) == header.handles


def _lib_path():
    return lib._name


def test_exported_symbols_are_the_header_s(header):
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) is not installed")
    out = subprocess.run([nm, "-D", "--defined-only", _lib_path()], capture_output=True,
                         text=True, check=True).stdout
    exported = {parts[2] for parts in (ln.split() for ln in out.splitlines())
                if len(parts) == 3 and parts[1] == "T"}
    ours = {s for s in exported if s.startswith("grist_")}
    assert ours == set(header.functions), (
        f"exported, not in grist_capi.h: {sorted(ours - set(header.functions))}; "
        f"in grist_capi.h, not exported: {sorted(set(header.functions) - ours)}")
    # Nothing else leaks out of the library (it is built with hidden visibility).
    others = sorted(s for s in exported - ours if not s.startswith(("_init", "_fini")))
    assert not others, f"the library exports more than its C ABI: {others[:20]}"


def test_the_package_ships_the_header():
    import grist
    shipped = os.path.join(grist.get_include(), "grist_capi.h")
    assert os.path.exists(shipped), shipped
    with open(shipped, "rb") as a, open(HEADER, "rb") as b:
        assert a.read() == b.read()


def _clang_decls():
    clang = shutil.which("clang")
    if clang is None:
        pytest.skip("clang is not installed (scripts/setup.sh installs it): the parser is not "
                    "cross-checked")
    p = subprocess.run([clang, "-x", "c", "-std=c11", "-fsyntax-only", "-Xclang", "-ast-dump=json",
                        HEADER], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    ast = json.loads(p.stdout)
    functions, structs = {}, {}
    for d in ast.get("inner", []):
        if d.get("isImplicit") or not d.get("name", "").startswith("grist_"):
            continue  # the system headers' declarations
        if d["kind"] == "FunctionDecl":
            params = [q["type"]["qualType"] for q in d.get("inner", []) if q["kind"] == "ParmVarDecl"]
            ret = re.match(r"^(.*?)\s*\(", d["type"]["qualType"]).group(1)
            functions[d["name"]] = (ret, params)
        elif d["kind"] == "RecordDecl" and d.get("completeDefinition"):
            structs[d["name"]] = [(q["name"], q["type"]["qualType"]) for q in d.get("inner", [])
                                  if q["kind"] == "FieldDecl"]
    return functions, structs


def test_parser_agrees_with_clang(header):
    functions, structs = _clang_decls()

    def sp(s):
        return s.replace(" ", "")
    assert set(functions) == set(header.functions)
    for name, (ret, params) in functions.items():
        mret, margs = header.functions[name]
        assert sp(ret) == mret.spelling(), (name, ret, str(mret))
        assert [sp(p) for p in params] == [t.spelling() for _, t in margs], name
    assert set(structs) == set(header.structs)
    for name, fields in structs.items():
        assert [(f, sp(t)) for f, t in fields] == \
            [(f, t.spelling()) for f, t in header.structs[name]], name


def test_header_compiles_as_c_and_cxx():
    for compiler, std in (("cc", "c99"), ("c++", "c++17")):
        cc = shutil.which(compiler)
        if cc is None:
            pytest.skip(f"{compiler} is not installed")
        lang = "c" if compiler == "cc" else "c++"
        p = subprocess.run([cc, "-x", lang, f"-std={std}", "-Wall", "-Wextra", "-Werror",
                            "-pedantic", "-fsyntax-only", HEADER], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
