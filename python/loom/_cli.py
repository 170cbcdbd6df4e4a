"""The `loom` console command of the wheel: runs the binary shipped in the package."""
import os
import sys

from . import binary


def main() -> None:
    os.execv(binary(), [binary(), *sys.argv[1:]])
