#!/usr/bin/env bash
# CTest entry for the Python package's tests: skipped (77) when there is no python3.
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
cd "$(dirname "$0")"
PYTHONPATH="$(cd ../../python && pwd)${PYTHONPATH:+:$PYTHONPATH}" exec python3 -m unittest -v test_package test_convert test_packaging test_viewer_check
