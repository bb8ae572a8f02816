"""Generates the protobuf and gRPC stubs (steadfast/v1) into the build, as python/CMakeLists.txt
does: protoc and grpc_python_plugin from PATH (or $PROTOC / $GRPC_PYTHON_PLUGIN), the protos
from ../proto (or $SF_PROTO_DIR). Everything else is in pyproject.toml."""

import glob
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py


def _tool(env: str, name: str) -> str:
    path = os.environ.get(env) or shutil.which(name)
    if not path:
        raise SystemExit(f"setup.py: {name} not found on PATH (Debian: apt-get install "
                         f"protobuf-compiler protobuf-compiler-grpc), or set ${env}")
    return path


class BuildWithStubs(build_py):
    def run(self) -> None:
        super().run()
        here = os.path.dirname(os.path.abspath(__file__))
        proto_dir = os.environ.get("SF_PROTO_DIR") or os.path.join(here, "..", "proto")
        protos = sorted(glob.glob(os.path.join(proto_dir, "steadfast", "v1", "*.proto")))
        if not protos:
            raise SystemExit(f"setup.py: no .proto files in {proto_dir}/steadfast/v1 "
                             f"(set $SF_PROTO_DIR to the repository's proto directory)")
        out = os.path.abspath(self.build_lib)
        os.makedirs(os.path.join(out, "steadfast", "v1"), exist_ok=True)
        subprocess.run([
            _tool("PROTOC", "protoc"), "-I", proto_dir,
            f"--python_out={out}", f"--grpc_python_out={out}",
            f"--plugin=protoc-gen-grpc_python={_tool('GRPC_PYTHON_PLUGIN', 'grpc_python_plugin')}",
            *protos], check=True)
        open(os.path.join(out, "steadfast", "v1", "__init__.py"), "a").close()


setup(cmdclass={"build_py": BuildWithStubs})
