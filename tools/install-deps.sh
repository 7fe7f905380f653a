#!/usr/bin/env bash
# Install everything sglc's build and tests need on Debian/Ubuntu (run as
# root): the C libraries, the references the tests compare against
# (PyTorch, NumPy, Jinja2 for /usr/bin/python3; python3-jsonschema, the
# independent validator of constrained JSON output), and the npm packages
# under tests/js (Hugging Face tokenizers; the OpenAI, LangChain and Vercel
# AI SDK clients with zod 3, the version all three accept).  .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends build-essential pkg-config clang \
  libcmocka-dev libjansson-dev libpcre2-dev libutf8proc-dev libcurl4-openssl-dev \
  libyaml-dev libmicrohttpd-dev \
  libopenmpi-dev openmpi-bin libgloo-dev g++ iproute2 \
  python3 python3-torch python3-numpy python3-jinja2 python3-jsonschema curl openssl
# libopenmpi-dev / openmpi-bin: tensor parallelism across machines (issue 12)
# goes through Open MPI (src/dist/dist_mpi.c, the only file including mpi.h;
# the Makefile builds a stub without it) and tests/scripts/test_tp_mpi.sh
# starts the ranks with mpirun.
# libgloo-dev (+ g++ for the one C++ file src/dist/dist_gloo.cc): the
# multi-node launch without mpirun (--nnodes / --node-rank / --dist-init-addr,
# tests/scripts/test_tp_multinode.sh); the Makefile skips that file without it.
# Node.js + npm for the JavaScript reference tests.  The machine may already
# ship a newer Node with its own npm; only install Debian's when none is
# there (mixing the two breaks dpkg).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  $SUDO apt-get install -y --no-install-recommends nodejs npm
fi
(cd tests/js && npm ci --no-audit --no-fund --ignore-scripts)
