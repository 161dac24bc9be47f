"""Generate the Python stubs from protos/ into sidecar/gen/ (one command: make protos).

protoc writes imports as the proto paths (``from compaction.v1 import ...``);
they are rewritten to live under ``sidecar.gen`` so that the distribution does
not claim a top-level ``compaction`` package. google.rpc comes from the
googleapis-common-protos package, not from here.

    python scripts/gen_protos.py            # regenerate sidecar/gen
    python scripts/gen_protos.py --out DIR  # generate elsewhere (the staleness test)
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
DEFAULT_OUT = ROOT / "sidecar" / "gen"
HEADER = "# Generated from protos/ by scripts/gen_protos.py. Do not edit.\n"
DESCRIPTORS = "descriptors.binpb"
_IMPORT = re.compile(r"^(from|import) compaction\.v1", re.M)


def generate(out: Path) -> None:
    sources = sorted(str(p.relative_to(PROTOS)) for p in (PROTOS / "compaction").rglob("*.proto"))
    well_known = str(resources.files("grpc_tools") / "_proto")
    bin_dir = Path(sys.executable).parent  # mypy-protobuf's plugins sit beside the interpreter
    with tempfile.TemporaryDirectory() as tmp:
        args = [
            "protoc",
            f"-I{PROTOS}",
            f"-I{well_known}",
            f"--plugin=protoc-gen-mypy={bin_dir / 'protoc-gen-mypy'}",
            f"--plugin=protoc-gen-mypy_grpc={bin_dir / 'protoc-gen-mypy_grpc'}",
            f"--python_out={tmp}",
            f"--mypy_out={tmp}",
            f"--grpc_python_out={tmp}",
            f"--mypy_grpc_out={tmp}",
            # The API with its comments, for server reflection (grpcurl describe shows them).
            f"--descriptor_set_out={Path(tmp) / DESCRIPTORS}",
            "--include_source_info",
            "--include_imports",
            *sources,
        ]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        for path in sorted(Path(tmp).rglob("*")):
            if path.is_dir():
                continue
            target = out / path.relative_to(tmp)
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.name == DESCRIPTORS:
                target.write_bytes(path.read_bytes())
                continue
            text = _IMPORT.sub(r"\1 sidecar.gen.compaction.v1", path.read_text())
            target.write_text(HEADER + text)
    for package in [out, *[p for p in out.rglob("*") if p.is_dir()]]:
        (package / "__init__.py").write_text(HEADER)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    generate(parser.parse_args().out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
