"""Re-create helpers/data/persuasion.txt from Debian's r-cran-janeaustenr package (provenance, run by hand).

    apt-get download r-cran-janeaustenr        # 1.0.0-1: Jane Austen's six novels as R data (MIT)
    python scripts/extract_austen.py r-cran-janeaustenr_1.0.0-1_all.deb persuasion > helpers/data/persuasion.txt

The package keeps each novel as an R character vector (one line of the printed book each, "" between
paragraphs) in R's lazy-load database (data/Rdata.rdx, data/Rdata.rdb). This reads that database
without R: the index and every object are R's XDR serialization (R Internals, §1.8), gzip-, zlib-
or xz-compressed. Lines are joined into paragraphs, one paragraph per line, a blank line between.
No R, no network; the standard library only.
"""
from __future__ import annotations

import gzip
import io
import lzma
import struct
import sys
import tarfile
import zlib

DATA = "./usr/lib/R/site-library/janeaustenr/data/Rdata"


class _Reader:
    """The subset of R's serialization the package's data uses: symbols, strings, vectors, pairlists."""

    def __init__(self, data: bytes):
        if data[:2] != b"X\n":
            raise ValueError("not an R XDR serialization")
        self.b, self.i, self.refs = data, 2, []
        version = self.int()
        self.int(), self.int()  # the writer's R version, the minimal reader version
        if version == 3:
            n = self.int()  # native encoding name
            self.i += n

    def int(self) -> int:
        (v,) = struct.unpack(">i", self.b[self.i:self.i + 4])
        self.i += 4
        return v

    def read(self):
        flags = self.int()
        kind, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
        if kind in (254, 242):  # NILVALUE, EMPTYENV
            return None
        if kind == 255:  # REFSXP
            return self.refs[(flags >> 8) - 1]
        if kind == 1:  # SYMSXP
            sym = self.read()
            self.refs.append(sym)
            return sym
        if kind == 9:  # CHARSXP
            n = self.int()
            if n == -1:
                return None
            s = self.b[self.i:self.i + n].decode("utf-8")
            self.i += n
            return s
        if kind == 2:  # LISTSXP: (tag, value) pairs
            out = []
            while True:
                attr = self.read() if has_attr else None  # noqa: F841 - attributes are not needed
                tag = self.read() if has_tag else None
                out.append((tag, self.read()))
                flags = self.int()
                if flags & 0xFF != 2:
                    self.i -= 4
                    self.read()  # the terminating NILVALUE
                    return out
                has_attr, has_tag = flags & (1 << 9), flags & (1 << 10)
        if kind in (16, 19):  # STRSXP, VECSXP
            out = [self.read() for _ in range(self.int())]
        elif kind in (10, 13):  # LGLSXP, INTSXP
            n = self.int()
            out = list(struct.unpack(f">{n}i", self.b[self.i:self.i + 4 * n]))
            self.i += 4 * n
        else:
            raise ValueError(f"R type {kind} is not handled")
        if has_attr:
            attrs = self.read()
            if kind == 19:
                names = dict(attrs).get("names")
                if names:
                    return dict(zip(names, out))
        return out


def _unpack(chunk: bytes) -> bytes:
    """One lazy-load record: 4-byte length, then zlib data, or a type byte (Z: xz, 0: none) and data."""
    if chunk[4:5] == b"Z":
        return lzma.decompress(chunk[5:])
    if chunk[4:5] == b"0":
        return chunk[5:]
    return zlib.decompress(chunk[4:])


def novel_lines(deb: str, name: str) -> list[str]:
    """The lines of one novel (emma, mansfieldpark, northangerabbey, persuasion, prideprejudice,
    sensesensibility) from the .deb file."""
    import subprocess

    data = subprocess.run(["dpkg-deb", "--fsys-tarfile", deb], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        rdx = tar.extractfile(DATA + ".rdx").read()
        rdb = tar.extractfile(DATA + ".rdb").read()
    index = _Reader(gzip.decompress(rdx)).read()
    variables = index["variables"]
    if name not in variables:
        raise ValueError(f"no novel {name!r}; the package has {', '.join(variables)}")
    offset, length = variables[name]
    return _Reader(_unpack(rdb[offset:offset + length])).read()


def paragraphs(lines: list[str]) -> str:
    out, cur = [], []
    for line in lines:
        line = (line or "").strip()
        if line:
            cur.append(line)
        elif cur:
            out.append(" ".join(cur))
            cur = []
    if cur:
        out.append(" ".join(cur))
    return "\n\n".join(out) + "\n"


def main(argv=None) -> int:
    import argparse
    import subprocess

    class Parser(argparse.ArgumentParser):
        def error(self, message):  # one line, exit 2
            self.exit(2, f"error: {message}\n")

    ap = Parser(prog="python scripts/extract_austen.py", description=__doc__.splitlines()[0])
    ap.add_argument("deb", help="r-cran-janeaustenr_*.deb (apt-get download r-cran-janeaustenr)")
    ap.add_argument("novel", nargs="?", default="persuasion")
    a = ap.parse_args(argv)
    try:
        text = paragraphs(novel_lines(a.deb, a.novel))
    except subprocess.CalledProcessError as exc:
        why = (exc.stderr or b"").decode(errors="replace").strip().splitlines()[-1:] or [f"exit {exc.returncode}"]
        print(f"error: dpkg-deb cannot read {a.deb!r}: {why[0]}; allowed: the r-cran-janeaustenr .deb", file=sys.stderr)
        return 2
    except (OSError, ValueError, KeyError, tarfile.TarError, EOFError, struct.error, zlib.error, lzma.LZMAError) as exc:
        print(f"error: cannot read the novels from {a.deb!r}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
