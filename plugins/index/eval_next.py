"""``neuralmind eval next REPO``: does ``next`` name the files an edit goes on to touch?

Real edit sessions are replayed from a repository's history: each commit (merges left out)
is the set of files changed together. The tree at the middle commit is indexed (its state
written under a temporary folder; the repository is only read); the older half of the
commits is fed to ``activity`` as edits, at their commit times; on each commit of the newer
half, ``next`` is given one of its files and should rank its other files — every file of the
commit takes its turn. Files are followed through renames to the name they had at the middle
commit; files that did not exist then are left out (nothing could know them).

Reported: recall@k (the share of a commit's other files in the top k, averaged over turns)
for ``next`` with learning on, structural only (no learned links), learned only, and a
co-change baseline that ranks files by how many training commits they shared with the given
file. ``frozen``: weights as trained (time stands at the middle commit); ``online``: each test
commit is learned after it is predicted, at its own time, links decaying in between."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from types import SimpleNamespace


def history(repo: Path, rev: str) -> list[dict]:
    """Commits oldest first: ``{sha, at, files, renames}``, files as named after the commit."""
    out = subprocess.run(["git", "--git-dir", str(_git_dir(repo)), "log", "--no-merges",
                          "--date-order", "--reverse", "-M", "--name-status",
                          "--format=@%H %ct", "--end-of-options", rev],
                         capture_output=True, text=True, check=True)
    commits: list[dict] = []
    for line in out.stdout.splitlines():
        if line.startswith("@"):
            sha, at = line[1:].split()
            commits.append({"sha": sha, "at": float(at), "files": [], "renames": []})
        elif line.strip() and commits:
            status, *paths = line.split("\t")
            if status.startswith("R") and len(paths) == 2:
                commits[-1]["renames"].append((paths[0], paths[1]))
                commits[-1]["files"].append(paths[1])
            elif status != "D" and paths:
                commits[-1]["files"].append(paths[-1])
    return commits


def at_split(commits: list[dict], split: int) -> list[list[str]]:
    """Each commit's files under the names they had at commit ``split``: renames after it
    are undone, renames before it carried forward."""
    named: list[list[str]] = [[] for _ in commits]
    forward: dict[str, str] = {}  # a name before the split → its name at the split
    for i in range(split, -1, -1):
        c = commits[i]
        named[i] = [forward.get(f, f) for f in c["files"]]
        for old, new in c["renames"]:
            forward[old] = forward.get(new, new)
    back: dict[str, str] = {}  # a name after the split → its name at the split
    for i in range(split + 1, len(commits)):
        c = commits[i]
        for old, new in c["renames"]:
            back[new] = back.get(old, old)
        named[i] = [back.get(f, f) for f in c["files"]]
    return named


def _git_dir(repo: Path) -> Path:
    return repo / ".git" if (repo / ".git").exists() else repo


def export(repo: Path, sha: str, dest: Path) -> None:
    """The tree of ``sha`` written to ``dest`` (``git archive``; the repository is read only)."""
    data = subprocess.run(["git", "--git-dir", str(_git_dir(repo)), "archive", sha],
                          capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")


def recall_at(ranked: list[str], wanted: set[str], k: int) -> float:
    return len(set(ranked[:k]) & wanted) / len(wanted)


def main(args) -> int:
    repo = Path(args.repo).resolve()
    try:
        commits = history(repo, args.rev)
    except (OSError, subprocess.CalledProcessError) as ex:
        detail = (getattr(ex, "stderr", "") or str(ex)).strip().splitlines()[0]  # git's first
        print(f"neuralmind: cannot read the history of {args.repo} at {args.rev}: "
              f"{detail.removeprefix('fatal: ')}", file=sys.stderr)
        return 2
    if len(commits) < 4:
        print(f"neuralmind: {args.repo} has {len(commits)} commits (not merges); replaying "
              "needs at least 4", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="nm-eval-next-") as work:
        report = evaluate(repo, commits, Path(work), args.k, args.max_files,
                          args.half_life_days)
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{repo}: {report['commits']} commits; trained on {report['train_sessions']} "
          f"(up to {report['split_at']}), tested on {report['test_sessions']} commits, "
          f"{report['turns']} turns ({report['skipped_files']} files absent at the split left "
          f"out); index of {report['files']} files built in {report['build_s']} s")
    print(f"{'ranking':<26}{'frozen R@' + str(args.k):>12}{'online R@' + str(args.k):>12}"
          f"{'ms/turn':>10}")
    for name, m in report["methods"].items():
        print(f"{name:<26}{m['frozen']:>12.3f}{m['online']:>12.3f}{m['ms']:>10.2f}")
    return 0


RANKINGS = (("next (learning on)", True, True), ("next (structural only)", False, True),
            ("next (learned only)", True, False))


def evaluate(repo: Path, commits: list[dict], work: Path, k: int, max_files: int,
             half_life_days: float | None = None) -> dict:
    from plugins.index import plugin
    from plugins.index.eval import throwaway_kernel
    split = len(commits) // 2 - 1
    names = at_split(commits, split)
    export(repo, commits[split]["sha"], work / "tree")
    kernel = throwaway_kernel(work, model=False)
    try:
        service = plugin._service(kernel)
        overrides = {"learn_max_files": max_files}
        if half_life_days:
            overrides["learn_half_life_days"] = half_life_days
        service.settings = service.learning.settings = service.settings.model_copy(
            update=overrides)
        project, _ = kernel.projects.register(str(work / "tree"))
        started = time.perf_counter()
        built = service.run_build(project, trigger="eval")
        build_s = round(time.perf_counter() - started, 2)
        indexed = set(service.graph(project, service.store(project)).by_path)
        sessions = [(c, list(dict.fromkeys(names[i]))) for i, c in enumerate(commits)]
        train = [(c, f) for c, f in sessions[: split + 1] if 2 <= len(f) <= max_files]
        test = [(c, [p for p in f if p in indexed], len(set(f) - indexed))
                for c, f in sessions[split + 1:] if 2 <= len(f) <= max_files]
        test = [t for t in test if len(t[1]) >= 2]
        cochange = CoChange(indexed)
        for c, files in train:
            service.learning.activity(project, files, "edit", c["sha"], at=c["at"])
            cochange.add(files)
        methods = {name: {"frozen": [], "online": [], "ms": []} for name, _, _ in RANKINGS}
        methods["co-change baseline"] = {"frozen": [], "online": [], "ms": []}
        frozen_at = commits[split]["at"]
        for phase in ("frozen", "online"):
            for c, files, _ in test:
                at = frozen_at if phase == "frozen" else c["at"]
                for f in files:
                    wanted = set(files) - {f}
                    for name, learned, structural in RANKINGS:
                        started = time.perf_counter()
                        ranked = _next(service, project, f, k, learned, structural, at)
                        methods[name]["ms"].append((time.perf_counter() - started) * 1000)
                        methods[name][phase].append(recall_at(ranked, wanted, k))
                    methods["co-change baseline"][phase].append(
                        recall_at(cochange.rank(f), wanted, k))
                if phase == "online":  # what was just predicted is learned, as it would be
                    service.learning.activity(project, files, "edit", c["sha"], at=c["at"])
                    cochange.add(files)
        return {"repo": str(repo), "commits": len(commits), "split_at": commits[split]["sha"],
                "train_sessions": len(train), "test_sessions": len(test),
                "turns": sum(len(files) for _, files, _ in test),
                "skipped_files": sum(gone for _, _, gone in test), "files": built["files"],
                "build_s": build_s, "k": k, "max_files": max_files,
                "half_life_days": service.settings.learn_half_life_days,
                "methods": {name: {key: _mean(v) for key, v in m.items()}
                            for name, m in methods.items()}}
    finally:
        kernel.shutdown()


class CoChange:
    """The baseline: how many commits each pair of files shared."""

    def __init__(self, indexed: set[str]):
        self.indexed = indexed
        self.counts: dict[str, Counter] = defaultdict(Counter)

    def add(self, files: list[str]) -> None:
        for a in files:
            for b in files:
                if a != b and b in self.indexed:
                    self.counts[a][b] += 1

    def rank(self, path: str) -> list[str]:
        found = self.counts.get(path, {})
        return sorted(found, key=lambda p: (-found[p], p))


def _next(service, project, path: str, k: int, learned: bool, structural: bool,
          at: float) -> list[str]:
    body = SimpleNamespace(files_open=[path], task=None, limit=k)
    found = service.next_files(project, body, learned=learned, structural=structural, at=at)
    return [f["path"] for f in found["files"]]


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0
