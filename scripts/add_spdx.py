#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# scripts/add_spdx.py [REPO] — puts the license's SPDX line at the top of
# every source file git tracks that lacks it (the second line after a
# shebang): the files unit_tests/check_spdx.cmake (CTest license_spdx_lines)
# checks, with the same pattern. REPO defaults to this checkout.
import os, re, subprocess, sys
repo = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINE = "SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception"
rx = re.compile(r"(\.(c|cc|cpp|h|hpp|cu|cuh|cmake|sh|py)(\.in)?|CMakeLists\.txt|^\.ci/run)$")
files = subprocess.run(["git", "-C", repo, "ls-files"], capture_output=True, text=True, check=True).stdout.split("\n")
n = 0
for f in files:
    if not f or not rx.search(f):
        continue
    p = f"{repo}/{f}"
    text = open(p, encoding="utf-8").read()
    lines = text.split("\n")
    slash = re.search(r"\.(c|cc|cpp|h|hpp|cu|cuh)(\.in)?$", f) is not None
    comment = ("// " if slash else "# ") + LINE
    at = 1 if lines and lines[0].startswith("#!") else 0
    if len(lines) > at and LINE in lines[at]:
        continue
    lines.insert(at, comment)
    open(p, "w", encoding="utf-8").write("\n".join(lines))
    n += 1
print(f"added to {n} files")
