"""Bytecode cache for modules imported from zip files, installed in the storage_vm test guest only.

Ansible runs every module from a fresh AnsiballZ zip, and zipimport compiles each .py in it on every
import without caching the result: under QEMU TCG that compile (~100 module_utils files) is about half
of the ~6 s each Ansible module takes in the guest. This caches the code objects under CACHE_DIR.
A hit needs the stored source to equal the new source byte for byte (the key is only a hint), and the
code's file names are set to the new path, so a cached module runs exactly as a freshly compiled one.
Loaded by a .pth file (scripts/vm/build-base.sh); any error falls back to a plain compile.
"""
import marshal
import os
import sys
import zipimport
import zlib

CACHE_DIR = "/var/cache/dlrack-zipimport/" + (sys.implementation.cache_tag or "none")


def _with_filename(code, filename):
    consts = tuple(_with_filename(c, filename) if isinstance(c, type(code)) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _install(original):
    def compile_source(pathname, source):
        try:
            path = os.path.join(CACHE_DIR, "%08x%08x%x" % (zlib.crc32(source), zlib.adler32(source), len(source)))
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                data = b""
            if data[:len(source)] == source and len(data) > len(source):
                return _with_filename(marshal.loads(data[len(source):]), pathname)
            code = original(pathname, source)
            if sys.dont_write_bytecode:
                return code
            os.makedirs(CACHE_DIR, exist_ok=True)
            tmp = "%s.%d" % (path, os.getpid())
            with open(tmp, "wb") as f:
                f.write(bytes(source) + marshal.dumps(code))
            os.replace(tmp, path)
            return code
        except Exception:  # pylint: disable=broad-except  # a cache must never break an import
            return original(pathname, source)
    return compile_source


if hasattr(zipimport, "_compile_source"):
    zipimport._compile_source = _install(zipimport._compile_source)  # pylint: disable=protected-access
