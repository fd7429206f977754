"""`pip install .` in a fresh virtual environment gives `import grist` with its native library and
the `grist` command, both from the installed package (not from build/).

The fresh venv sees the shared environment's packages through a .pth file (the effect of
--system-site-packages, for an environment that is itself a venv), so the build backend
(scikit-build-core, pinned in requirements.txt) is found offline: pip runs with --no-index
--no-build-isolation. The CMake build goes to $GRIST_PIP_BUILD_DIR (default "$GRIST_BUILD_DIR-pip",
a sibling of the tests' build), reused between runs, through ccache when it is installed, and
builds only the package's targets (grist, grist_capi). With CCACHE_BASEDIR at the checkout
(scripts/test.sh sets it and builds through ccache), paths hash relative to the build folder, so
the sibling's compile commands are the tests' build's (the same compilers, taken from its
CMakeCache.txt) and its objects come from the cache. On the 2-core development VM: an empty
sibling after the tests' build 14 s (112 of 115 compiles from the cache; 196 s without them, 346 s
in a CI run); a rerun with nothing changed 7 s (venv, pip, a no-op ninja).
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cmake_cache_value(pip_build_dir, key):
    """KEY's value in the CMakeCache.txt of the tests' build (GRIST_BUILD_DIR), or None."""
    tests_build = os.environ.get("GRIST_BUILD_DIR") or os.path.join(ROOT, "build")
    if os.path.abspath(tests_build) == os.path.abspath(pip_build_dir):
        return None
    try:
        with open(os.path.join(tests_build, "CMakeCache.txt")) as f:
            for line in f:
                name, _, value = line.rstrip("\n").partition("=")
                if name.split(":")[0] == key:
                    return value or None
    except OSError:
        return None
    return None


def test_pip_install_gives_import_grist_and_the_grist_command(tmp_path):
    build_dir = os.environ.get("GRIST_PIP_BUILD_DIR") or (
        os.environ.get("GRIST_BUILD_DIR", os.path.join(ROOT, "build")).rstrip("/") + "-pip")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, "_grist_test_parent_env.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "GRIST_BUILD_DIR", "GRIST_CAPI_LIB", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv}/bin:/usr/bin:/bin"
    cmake_args = []
    if shutil.which("ccache"):
        cmake_args += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_C_COMPILER_LAUNCHER=ccache"]
        env.setdefault("CCACHE_BASEDIR", ROOT)
        # The tests' build's compilers by the same names (ccache hashes the name: without this the
        # pip build takes Python's x86_64-linux-gnu-g++ where CMake found c++, and misses).
        for var, key in (("CXX", "CMAKE_CXX_COMPILER"), ("CC", "CMAKE_C_COMPILER")):
            compiler = cmake_cache_value(build_dir, key)
            if compiler and var not in env:
                env[var] = compiler
    env["CMAKE_ARGS"] = " ".join(cmake_args)
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = env.get("CMAKE_BUILD_PARALLEL_LEVEL", "2")
    p = subprocess.run([str(py), "-m", "pip", "install", "--no-index", "--no-build-isolation",
                        "--no-deps", "-q", f"--config-settings=build-dir={build_dir}", ROOT],
                       env=env, capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]

    # import grist: the installed copy, with its native library.
    probe = ("import json, grist, grist._native as n; "
             "print(json.dumps({'file': grist.__file__, 'lib': n.lib._name, "
             "'version': grist.version()}))")
    out = subprocess.run([str(py), "-c", probe], env=env, capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["file"].startswith(site), info
    assert info["lib"].startswith(os.path.join(site, "grist")), info
    # The C ABI's header ships with the package (grist.get_include()).
    assert os.path.exists(os.path.join(site, "grist", "include", "grist_capi.h"))
    assert info["version"]
    # The grist command, installed into the venv's bin/.
    grist_cmd = venv / "bin" / "grist"
    assert grist_cmd.exists()
    v = subprocess.run(["grist", "version"], env=env, capture_output=True, text=True,
                       cwd=tmp_path)
    assert v.returncode == 0, v.stderr
    assert info["version"] in v.stdout
    h = subprocess.run(["grist", "--help"], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert h.returncode == 0 and "build" in h.stdout and "verify" in h.stdout
    # The native library works: a synthetic release written and read back through grist.Loader
    # (torch comes from the shared environment).
    rel = tmp_path / "rel"
    w = subprocess.run([str(py), "-c",
                        "import sys, grist; from grist.loader import write_synthetic_release as w; "
                        "w(sys.argv[1], samples=16, seq_len=8, vocab_size=100); "
                        "b = next(iter(grist.Loader(sys.argv[1], 2, 2))); "
                        "print(tuple(b['input_ids'].shape))", str(rel)],
                       env=env, capture_output=True, text=True, cwd=tmp_path)
    assert w.returncode == 0, w.stderr
    assert w.stdout.strip() == "(2, 8)"
    # python -m grist.hf is part of the package too.
    c = subprocess.run([str(py), "-m", "grist.hf", "--help"], env=env, capture_output=True,
                       text=True, cwd=tmp_path)
    assert c.returncode == 0 and "Parquet" in c.stdout
