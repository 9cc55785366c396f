"""How a pipeline holds up when users behave differently (``ikatkit robustness``, ``ikatkit topics perturb``).

One run of a config per behaviour profile, each over the topics said by that profile
(:func:`ikatkit.simulate.profiles.perturb`); the runs are compared with the first profile's (``clean``) by the
``compare`` machinery: ranking measures with the qrels, response measures against the canonical responses, the
paired tests, tables and a plot per measure in one HTML report (:func:`ikatkit.evaluate.report.write_report`).
Every output names the profiles and seed in ``manifest.json``, with the command that reproduces it.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ikatkit import __version__
from ikatkit.atomic import write_json, write_text
from ikatkit.digest import file_digest
from ikatkit.simulate.profiles import Profile, parse_profile, perturb
from ikatkit.textfile import read_text
from ikatkit.topics import load_topics

RESPONSE_MEASURES = ("ROUGE-L", "Recall", "Words")  # against the canonical responses; no model to load


def manifest_path(out: str | Path) -> Path:
    """Where the manifest of a perturbed topic file goes: ``typos.json`` -> ``typos.manifest.json``."""
    return Path(out).with_suffix(".manifest.json")


def perturb_file(path: str | Path, profile: Profile, out: str | Path, year: int | None = None) -> dict[str, Any]:
    """Write the topics of ``path`` said by ``profile`` to ``out`` (same format, same bytes for the same seed) and
    a manifest beside it; return the summary (with ``manifest``)."""
    load_topics(path, year)  # one clear error for a missing or malformed file
    data = json.loads(read_text(path))
    perturbed, summary = perturb(data, profile, year, Path(path))
    write_json(out, perturbed)
    command = ["ikatkit", "topics", "perturb", str(path), "--profile", profile.name, "--seed", str(profile.seed),
               "--out", str(out)]
    summary = {"command": shlex.join(command), "source": str(path), "source_sha256": file_digest(path),
               "ikatkit": __version__, **summary}
    write_json(manifest_path(out), summary)
    return {**summary, "manifest": str(manifest_path(out))}


def robustness(config: str | Path, topics: str | Path, qrels: str | Path | None, profiles: Sequence[str],
               out: str | Path, *, seed: int = 0, index: str | Path | None = None, cache: str | Path | None = None,
               conversations: Sequence[str] | None = None, measures: Sequence[str] | None = None,
               response_measures: Sequence[str] | None = RESPONSE_MEASURES, test: str = "ttest",
               correction: str = "holm") -> Path:
    """One run of ``config`` per profile under ``out/runs/PROFILE`` over ``out/topics/PROFILE.json`` (a
    :class:`~ikatkit.pipelines.session.RunSession` each: the first checks the config before anything loads), compared
    with the first profile's run in ``out/report.html`` (and the compare tables); ``response_measures`` None or
    empty leaves responses out. Runs resume from their checkpoints. Returns the report's path."""
    from ikatkit.evaluate.compare import compare_responses
    from ikatkit.evaluate.report import write_report
    from ikatkit.pipelines import load_config, run_pipeline

    out = Path(out)
    parsed = [parse_profile(name, seed) for name in profiles]
    names = [p.name for p in parsed]
    run_config = load_config(config)
    runs: dict[str, Path] = {}
    perturbed: dict[str, Any] = {}
    for profile in parsed:
        said = out / "topics" / f"{profile.name}.json"
        perturbed[profile.name] = perturb_file(topics, profile, said)
        chosen = load_topics(said)
        if conversations:
            chosen = chosen.subset(list(conversations))
        outcome = run_pipeline(run_config, chosen, out / "runs" / profile.name, index=index, cache_dir=cache)
        runs[profile.name] = outcome.run_file
    clean = load_topics(topics)
    responses = None
    if response_measures and any(t.response for t in clean):
        responses = compare_responses(runs, topics=clean, measures=list(response_measures), test=test,
                                      correction=correction)
    report = write_report(runs, qrels, out, topics=clean, responses=responses, measures=measures, test=test,
                          correction=correction)
    command = ["ikatkit", "robustness", str(config), "--topics", str(topics),
               *(["--qrels", str(qrels)] if qrels else []), "--profiles", *names, "--seed", str(seed),
               "--out", str(out), *(["--index", str(index)] if index else []),
               *(["--conversations", *conversations] if conversations else []),
               *(["--measures", *measures] if measures else []),
               "--response-measures", *(response_measures or [])]
    write_json(out / "manifest.json", {
        "command": shlex.join(command), "config": str(config), "config_sha256": file_digest(config),
        "topics": str(topics), "topics_sha256": file_digest(topics), "qrels": str(qrels) if qrels else None,
        "profiles": names, "seed": seed, "baseline": names[0], "ikatkit": __version__,
        "runs": {name: str(path) for name, path in runs.items()},
        "perturbed": {name: {k: v for k, v in s.items() if k not in ("command", "source", "source_sha256")}
                      for name, s in perturbed.items()}})
    write_text(out / "README.md", f"# Robustness of {Path(config).name} to simulated users\n\n"
               f"Reproduce: `{shlex.join(command)}`\n\nBaseline: `{names[0]}`; profiles: {', '.join(names)}; seed "
               f"{seed}. Open report.html; comparison.md has the ranking table"
               + (", responses_comparison.md the response table.\n" if responses else ".\n"))
    return report


def sessions(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What simulated users of a dump (``/run/dump`` rows) did: sessions, answers per session, sessions left
    early and why (the farewell's ``left``), per profile (each user turn's ``user_meta.profile``)."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_topic.setdefault(row["metadata"]["topic_id"].rpartition("_")[0], []).append(row["responses"][0])
    summary: dict[str, Any] = {}
    for turns in by_topic.values():
        profile = turns[0].get("user_meta", {}).get("profile", "unknown")
        entry = summary.setdefault(profile, {"sessions": 0, "answers": 0, "left_early": 0, "reasons": {}})
        entry["sessions"] += 1
        entry["answers"] += sum(t["assistant_text"] is not None for t in turns)
        left = turns[-1].get("user_meta", {}).get("left")
        if left:
            entry["left_early"] += 1
            entry["reasons"][left] = entry["reasons"].get(left, 0) + 1
    for entry in summary.values():
        entry["answers_per_session"] = round(entry["answers"] / entry["sessions"], 2)
    return summary
