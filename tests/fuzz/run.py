"""Fuzz the compiler from the command line and summarise the failures by class.

    python -m tests.fuzz.run --n 500 --seed 0 --backend numba
    python -m tests.fuzz.run --n 2000 --backend numpy --backend numba --markdown out.md
    python -m tests.fuzz.run --seed 1234 --n 1 --show      # one program, its source and outcome
    python -m tests.fuzz.run --n 500 --only reduce,slice     # only these constructs
    python -m tests.fuzz.run --n 1000 --backend numpy --backend numba --compare tests/fuzz/FAILURES-baseline.json
                                                             # fixed / still failing / new, against the baseline

Program i of a run is ``generate(seed + i)``, so any program is reproduced by its seed alone.
For each failure class it prints the count, the seeds, and one reproducer: the shortest
failing program of that class, shrunk further (``--no-shrink`` to skip).
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
os.environ.setdefault("NBACCEL_CACHE_DIR", str(ROOT / ".nbaccel-cache" / "fuzz"))

from .check import BACKENDS, backend_supported, check   # noqa: E402
from .programs import generate                          # noqa: E402
from .rules import PATTERN_WEIGHTS, WEIGHTS             # noqa: E402
from .shrink import shrink                              # noqa: E402


def fuzz(n, seed, backends, weights=None, progress=None, return_all=False):
    """Run n programs on each backend: {backend: {class: [(program, outcome), ...]}}, timings."""
    failures = {b: collections.defaultdict(list) for b in backends}
    seconds = dict.fromkeys(backends, 0.0)
    for i in range(n):
        program = generate(seed + i, weights, return_all)
        for b in backends:
            t0 = time.perf_counter()
            outcome = check(program, b)
            seconds[b] += time.perf_counter() - t0
            if not outcome.ok:
                failures[b][outcome.klass].append((program, outcome))
        if progress and (i + 1) % progress == 0:
            print(f"  {i + 1}/{n} programs", file=sys.stderr, flush=True)
    return failures, seconds


def reproducers(failures, do_shrink=True) -> dict:
    """{backend: [(class, count, seeds, shrunk program, its outcome)]}, biggest class first."""
    out = {}
    for b, classes in failures.items():
        rows = []
        for klass, items in sorted(classes.items(), key=lambda kv: -len(kv[1])):
            examples = []
            for program, outcome in _distinct(items, 3 if klass.startswith("wrong value") else 1):
                if do_shrink:
                    program = shrink(program, b, klass)
                    outcome = check(program, b)
                examples.append((program, outcome))
            rows.append((klass, len(items), [p.seed for p, _ in items], examples))
        out[b] = rows
    return out


def _distinct(items, k):
    """The k smallest failing programs whose sets of rules differ: a wrong value has no
    message to group by, so a class of them may hold several bugs."""
    chosen, seen = [], set()
    for program, outcome in sorted(items, key=lambda it: it[0].size()):
        rules = frozenset(s.rule for s in program.statements)
        if rules not in seen:
            seen.add(rules)
            chosen.append((program, outcome))
        if len(chosen) == k:
            break
    return chosen


def overview(n, failures) -> list:
    """A Markdown table: each failure class with its count per backend."""
    backends = list(failures)
    classes = sorted({k for c in failures.values() for k in c},
                     key=lambda k: -sum(len(failures[b].get(k, ())) for b in backends))
    lines = ["| failure class | " + " | ".join(backends) + " |",
             "|---|" + "---:|" * len(backends)]
    for k in classes:
        counts = " | ".join(str(len(failures[b].get(k, ()))) for b in backends)
        lines.append(f"| {k.replace('|', '/')} | {counts} |")
    failed = " | ".join(str(len({p.seed for items in failures[b].values() for p, _ in items}))
                        for b in backends)
    lines.append(f"| **programs failing (of {n})** | {failed} |")
    return lines + [""]


def summary(n, seed, failures, seconds, rows, markdown=False) -> str:
    out = overview(n, failures) if markdown else []
    shown = {}                      # class -> the backend whose section shows its reproducer
    for b, classes in failures.items():
        failed = len({p.seed for items in classes.values() for p, _ in items})
        out.append(f"{'## ' if markdown else ''}backend {b}: {failed}/{n} programs fail "
                   f"(seeds {seed}..{seed + n - 1}, {seconds[b]:.1f} s), {len(classes)} classes")
        out.append("")
        for rank, (klass, count, seeds, examples) in enumerate(rows[b], 1):
            seeds_text = ", ".join(map(str, seeds[:8])) + (" ..." if len(seeds) > 8 else "")
            out.append(f"{'### ' if markdown else ''}{rank}. [{count}] {klass}")
            out.append(f"seeds: {seeds_text}")
            if klass in shown and not klass.startswith("wrong value"):
                out.append(f"(the same class as under {shown[klass]}: reproducer there)")
                out.append("")
                continue
            shown.setdefault(klass, b)
            for program, outcome in examples:
                out.append("```python" if markdown else "")
                out.append(program.reproducer(b).rstrip())
                out.append("```" if markdown else "")
                detail = outcome.detail if not outcome.ok else "(the shrunk program passed)"
                prefix = "    " if markdown else "# "
                out.append(prefix + detail.replace("\n", "\n" + prefix))
            out.append("")
    return "\n".join(out)


def generator_fingerprint(seed, n, weights, return_all) -> str:
    """A hash of the programs of these seeds: equal iff the generator made the same ones."""
    h = hashlib.sha1()
    for i in range(n):
        h.update(generate(seed + i, weights, return_all).source().encode())
    return h.hexdigest()[:16]


def compare_runs(before: dict, after: dict, seeds) -> str:
    """Fixed / still failing / newly failing programs per backend, against an earlier run."""
    out = []
    for b, now in after.items():
        then = {int(s): k for s, k in before.get(b, {}).items() if int(s) in seeds}
        fixed = [s for s in then if s not in now]
        new = collections.Counter(now[s] for s in now if s not in then)
        changed = sum(1 for s in now if s in then and now[s] != then[s])
        out.append(f"backend {b} against the earlier run: {len(fixed)} fixed, "
                   f"{sum(1 for s in now if s in then)} still failing ({changed} in another class), "
                   f"{sum(new.values())} newly failing")
        for k, count in new.most_common():
            out.append(f"  new [{count}] {k}: seeds {', '.join(str(s) for s in now if now[s] == k and s not in then)[:120]}")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=500, help="number of programs")
    ap.add_argument("--seed", type=int, default=0, help="seed of the first program")
    ap.add_argument("--backend", action="append", help=f"backend(s) to run (default {BACKENDS})")
    ap.add_argument("--only", help="comma-separated rules to enable (the others get weight 0)")
    ap.add_argument("--disable", help="comma-separated rules to switch off")
    ap.add_argument("--patterns", help="comma-separated broadcasting patterns to enable "
                    f"(of {','.join(PATTERN_WEIGHTS)})")
    ap.add_argument("--return-all", action="store_true", help="return every intermediate")
    ap.add_argument("--show", action="store_true", help="print every program and its outcome")
    ap.add_argument("--no-shrink", action="store_true", help="print reproducers unshrunk")
    ap.add_argument("--markdown", help="also write the summary as Markdown to this file")
    ap.add_argument("--json", help="write {backend: {seed: failure class}} to this file")
    ap.add_argument("--compare", help="a --json file of an earlier run: say what was fixed, "
                    "what still fails and what newly fails")
    args = ap.parse_args(argv)

    weights = dict(WEIGHTS)
    if args.only:
        keep = set(args.only.split(","))
        weights = {k: (w if k in keep else 0) for k, w in weights.items()}
    for k in (args.disable.split(",") if args.disable else []):
        weights[k] = 0
    unknown = set(weights) - set(WEIGHTS)
    if unknown:
        ap.error(f"unknown rules {sorted(unknown)}; rules are {sorted(WEIGHTS)}")
    if args.patterns:
        keep = set(args.patterns.split(","))
        if keep - set(PATTERN_WEIGHTS):
            ap.error(f"patterns are {sorted(PATTERN_WEIGHTS)}")
        for k in PATTERN_WEIGHTS:
            PATTERN_WEIGHTS[k] = PATTERN_WEIGHTS[k] if k in keep else 0
    backends = args.backend or list(BACKENDS)
    for b in backends:
        if not backend_supported(b):
            ap.error(f"nb.compile does not accept backend {b!r} yet")

    if args.show:
        for i in range(args.n):
            p = generate(args.seed + i, weights, args.return_all)
            print(f"# seed {p.seed}\n{p.source()}")
            for b in backends:
                print(f"# {b}: {check(p, b)}\n")
        return 0
    failures, seconds = fuzz(args.n, args.seed, backends, weights, progress=max(50, args.n // 10),
                             return_all=args.return_all)
    classes = {b: {p.seed: k for k, items in c.items() for p, _ in items} for b, c in failures.items()}
    fingerprint = generator_fingerprint(args.seed, args.n, weights, args.return_all)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({
            "seeds": [args.seed, args.n], "generator": fingerprint,
            "failures": {b: {str(s): k for s, k in sorted(c.items())} for b, c in classes.items()},
        }, indent=0) + "\n")
    if args.compare:
        before = json.loads(pathlib.Path(args.compare).read_text())
        start, count = before["seeds"]
        if [start, count] == [args.seed, args.n] and before["generator"] != fingerprint:
            print("warning: the earlier run had another generator or weights: the same seed "
                  "is another program now, so the comparison means little\n")
        elif [start, count] != [args.seed, args.n]:
            print(f"note: the earlier run had seeds {start}..{start + count - 1}; only those "
                  "are compared, and the generator is not checked to be the same\n")
        print(compare_runs(before["failures"], classes, range(args.seed, args.seed + args.n)))
    rows = reproducers(failures, do_shrink=not args.no_shrink)
    print(summary(args.n, args.seed, failures, seconds, rows))
    if args.markdown:
        md = summary(args.n, args.seed, failures, seconds, rows, markdown=True)
        pathlib.Path(args.markdown).write_text(md + "\n")
    return 1 if any(failures.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
