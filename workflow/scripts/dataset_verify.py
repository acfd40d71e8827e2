"""Workflow step: full verification of the dataset; fails the rule on any problem. A generated
graph must also be the one the config asks for (size, seed, heterogeneity, feature width): a
folder left by another run under the same name is refused, not silently reused."""

import json
import sys
from pathlib import Path

from lsm_gnn.datasets.verify import errors, verify
from lsm_gnn.utils.atomic import write_text
from wfcommon import log_to

sm = snakemake  # noqa: F821  (injected by Snakemake)
log_to(sm)
data, ds = sm.params.data, sm.params.dataset
meta = json.loads((Path(data) / "metadata.json").read_text())

if ds["kind"] == "synthetic":
    src = meta.get("source") or {}
    want = {"size": ds["size"], "seed": sm.params.seed, "heterogeneous": ds["hetero"]}
    found = {k: src.get(k) for k in want}
    wrong = [f"source.{k}: config asks for {want[k]!r}, the folder holds {found[k]!r}" for k in want
             if str(found[k]) != str(want[k])]
    if meta["features"]["dim"] != ds["dim"]:
        wrong.append(f"features.dim: config asks for {ds['dim']} (synthetic_dim), the folder holds {meta['features']['dim']}")
    if wrong:
        for w in wrong:
            print(f"{data}/metadata.json: {w}", file=sys.stderr)
        sys.exit(f"{data} is not the graph this config generates ({'; '.join(wrong)}); remove the folder "
                 "(Snakemake regenerates it) or change the config")

problems = verify(data, quick=False)
for p in problems:
    print(f"{data}/{p}" if p.severity == "error" else f"{data}/{p} (warning)", file=sys.stderr)
if errors(problems):
    sys.exit(f"{data}: {len(errors(problems))} problem(s); see above")
warned = "".join(f"warning: {p}\n" for p in problems)
write_text(sm.output[0], f"{data}: OK (full check: sizes, sha256 of every file and of metadata.json, dtypes, "
                         "id ranges, CSC/CSR monotonicity and agreement, labels, splits, static scores, "
                         "row checksums)\n" + warned)
