"""``ikatkit eval``, ``eval-ptkb``, ``eval-responses``, ``compare`` and ``report``: evaluation of runs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ikatkit.errors import IkatError
from ikatkit.evaluate.qrels import MISSING
from ikatkit.evaluate.responses.nuggets import DEFAULT_THRESHOLD
from ikatkit.evaluate.responses.providers.base import SIM_THRESHOLD
from ikatkit.evaluate.responses.providers.simulator import UNREACHED
from ikatkit.evaluate.responses.scorers import DEFAULT_MODEL
from ikatkit.evaluate.significance import CORRECTIONS, TESTS
from ikatkit.evaluate.user_types import RUBRIC_TURNS

if TYPE_CHECKING:
    from ikatkit.evaluate.evaluate import EvalResult
    from ikatkit.evaluate.qrels import Qrels
    from ikatkit.evaluate.user_types import TypeTable
    from ikatkit.runs.model import Run
    from ikatkit.topics import Topics


def add(sub: argparse._SubParsersAction) -> None:
    _add_eval(sub)
    _add_eval_responses(sub)
    _add_compare(sub)


def _add_eval(sub: argparse._SubParsersAction) -> None:
    for name, help_text in (("eval", "evaluate a run's passage ranking against qrels (ir-measures)"),
                            ("eval-ptkb", "evaluate a run's PTKB provenance ranking against PTKB qrels")):
        p = sub.add_parser(name, help=help_text)
        scores = "{qid: {ptkb_key: score}}" if name == "eval-ptkb" else "{qid: {docid: score}}"
        p.add_argument("run", help=f"official JSON/JSONL run, TREC run, or {scores} JSON")
        p.add_argument("--qrels", required=True, help="TREC qrels (PTKB qrels for eval-ptkb)")
        p.add_argument("--measures", nargs="+", help="ir-measures names (default: the track's measures)")
        p.add_argument("--per-query", action="store_true", help="also print per-query values")
        p.add_argument("--missing", choices=MISSING, default=MISSING[0],
                       help="judged turns the run lacks: left out (as trec_eval) or counted as 0")
        p.add_argument("--format", choices=["tsv", "json"], default="tsv",
                       help="tsv: 'measure<TAB>all<TAB>value' lines (with --per-query also one line per turn: "
                            "'measure<TAB>qid<TAB>value'); json: {mean, evaluated, missing[, per_query]}")
        p.add_argument("--out", help="write the result here instead of standard output")
        if name == "eval-ptkb":
            p.add_argument("--topics", help="topics file: maps PTKB statement texts (2025 runs) to keys")
            _add_ptkb_classify(p)
        else:
            p.add_argument("--rubrics", help="an interactive run against rubric-based qrels (rubric_id doc:passage "
                                             "rel, 2026): the rubrics file (rubrics.json, rubrics.csv, or a topics "
                                             "file: each turn's need) mapping each turn's user_rubrik to "
                                             "rub_<conversation>_<n>, n by the file's order")
            _add_by_user_type(p)
            _add_unreached(p)
            p.add_argument("--rubric-turn", choices=RUBRIC_TURNS, default=RUBRIC_TURNS[0],
                           help="the turn whose citations stand for a rubric its user pursued over several turns: "
                                "last (the answer it ended on), best (scored highest by the user) or first")
        p.set_defaults(func=_run_eval, ptkb=name == "eval-ptkb")


def _add_by_user_type(p: argparse.ArgumentParser) -> None:
    p.add_argument("--by", choices=["run", "user-type"], default="run",
                   help="user-type: interactive runs per simulated user type (2026), with coverage (rubrics reached "
                        "/ rubrics) beside every mean")
    p.add_argument("--user-types", help="user id -> user type map (JSON, `simulate --user-map`), where the run does "
                                        "not note each user's type")


def _add_unreached(p: argparse.ArgumentParser) -> None:
    p.add_argument("--unreached", choices=UNREACHED, default=UNREACHED[0],
                   help="rubrics a user never reached (the Sim measures: never pursued on a judged turn): left out of "
                        "the means (default: compare types over what each reached) or counted 0 (the organizers' "
                        "2026 totals)")


def _rubrics_footer(table: TypeTable) -> str:
    """What the table's rubric counts are: under zero, how many belong to conversations a type never played."""
    if table.unreached == "skip":
        return "; rubrics: those of the conversations each type's users played"
    unplayed = table.info.get("unplayed_rubrics", {})
    parts = [f"{name} {n} of {table.rows[name].rubrics}" for name, n in unplayed.items() if n]
    return ("; rubrics: every judged rubric per user, those of conversations the type never played included ("
            + ", ".join(parts) + ")" if parts else "; rubrics: every judged rubric per user")


def _user_type_map(args: argparse.Namespace) -> dict[str, str] | None:
    from ikatkit.evaluate.user_types import read_user_types

    return read_user_types(args.user_types) if args.user_types else None


def _run_eval(args: argparse.Namespace) -> int:
    from ikatkit.atomic import write_text
    from ikatkit.evaluate.ptkb import evaluate_ptkb

    if args.ptkb and args.classify:
        result = _ptkb_classification(args)
    elif args.ptkb:
        run, fmt, qrels, _ = _ptkb_inputs(args)
        rankings: Run | dict[str, dict[str, float]] = run
        if fmt == "dict":  # {qid: {ptkb_key: score}}: the keys are PTKB keys
            rankings = {t.turn_id: dict(t.ranking()) for t in run.turns}
        result = evaluate_ptkb(rankings, qrels, args.measures, missing=args.missing)
    else:
        from ikatkit.evaluate.user_types import TypeTable

        found = _passage_eval(args)
        if isinstance(found, TypeTable):
            return _print_table(args, found)
        result = found
    note = _turns_note(args, result, rankings if args.ptkb and not args.classify else None)
    text = (json.dumps(result.to_json(args.per_query), indent=2) + "\n" if args.format == "json"
            else result.to_tsv(args.per_query) + f"# {note}\n")
    if args.out:
        write_text(args.out, text)
    else:
        sys.stdout.write(text)
    if args.format == "json":  # JSON holds the counts but no remark: the remark goes beside it
        print(note, file=sys.stderr)
    return 0


def _turns_note(args: argparse.Namespace, result: EvalResult, rankings: Run | dict[str, dict[str, float]] | None
                ) -> str:
    """What the means are over: the judged turns the run has, of those in the qrels, and the others (missing, or
    for PTKB rankings apart: listed empty and not in the run), skipped or scored 0 (``--missing``)."""
    judged, evaluated = len(result.evaluated) + len(result.missing), len(result.evaluated)
    if args.missing == "zero" and result.missing:
        head = f"means over the {judged} judged turns of the qrels, {evaluated} that the run has"
        tail = " (scored 0: --missing zero)"
    else:
        head = f"means over the {evaluated} judged turns the run has (of {judged} in the qrels)"
        tail = " (left out, as trec_eval does; --missing zero scores them 0)" if result.missing else ""
    if rankings is not None:
        from ikatkit.evaluate.ptkb import ptkb_rankings

        listed = ptkb_rankings(rankings)
        empty = sum(q in listed for q in result.missing)
        return (f"{head}; {empty} judged turns in the run with an empty PTKB provenance list, "
                f"{len(result.missing) - empty} judged turns not in the run{tail}")
    return f"{head}; {len(result.missing)} judged turns missing from the run{tail}"


def _passage_eval(args: argparse.Namespace) -> EvalResult | TypeTable:
    """``ikatkit eval``: an offline run against turn qrels, or an interactive run against rubric qrels (per rubric,
    per user type); an interactive run against turn qrels is refused."""
    from ikatkit.evaluate.evaluate import evaluate
    from ikatkit.evaluate.qrels import load_qrels, load_rubric_qrels, qrels_columns
    from ikatkit.evaluate.responses.rubrics import read_rubrics
    from ikatkit.evaluate.user_types import evaluate_rubric_run, offline_qrels_error
    from ikatkit.runs.io import read_run

    run = read_run(args.run)
    interactive = any(t.user is not None for t in run.turns)
    if qrels_columns(args.qrels) == 3 or args.rubrics:
        if not args.rubrics:
            raise IkatError("rubric-based qrels (rubric_id doc:passage rel) need the rubrics the run's users pursued",
                            where="--qrels", fix="pass --rubrics (rubrics.json, rubrics.csv or the topics file)")
        if not interactive:
            raise IkatError(f"run {run.run_name or args.run} is not interactive: rubric qrels score the turns a "
                            "simulated user spent on each rubric", where="--rubrics",
                            fix="pass an interactive run (a simulation dump or a released interactive run), or the "
                                "offline qrels without --rubrics")
        return evaluate_rubric_run(run, load_rubric_qrels(args.qrels), read_rubrics(args.rubrics), args.measures,
                                   user_types=_user_type_map(args), by_type=args.by == "user-type",
                                   choose=args.rubric_turn, unreached=args.unreached)
    qrels = load_qrels(args.qrels)
    if interactive:
        raise offline_qrels_error(run.run_name or str(args.run), qrels)
    if args.by == "user-type":
        raise IkatError("--by user-type needs an interactive run and rubric-based qrels", where="--by",
                        fix="pass --rubrics and the rubric qrels, or leave out --by")
    return evaluate(run, qrels, args.measures, missing=args.missing, source=args.qrels)


def _print_table(args: argparse.Namespace, table: TypeTable) -> int:
    """A per-user-type table (tsv or json) to --out or standard output; what it counts on standard error."""
    from ikatkit.atomic import write_text

    text = json.dumps(table.to_json(), indent=2) + "\n" if args.format == "json" else table.to_tsv()
    if args.out:
        write_text(args.out, text)
    else:
        sys.stdout.write(text)
    info = table.info
    print(f"means over {'every rubric (unreached: 0)' if table.unreached == 'zero' else 'the rubrics reached'}"
          + _rubrics_footer(table)
          + (f"; a rubric's turn: {info['rubric_turn']}" if "rubric_turn" in info else "")
          + (f"; {info['unmatched_rubrics']} turns pursue a rubric the rubrics file lacks (e.g. "
             f"{'; '.join(info['unmatched_examples'])})" if info.get("unmatched_rubrics") else ""), file=sys.stderr)
    return 0


def _add_ptkb_classify(p: argparse.ArgumentParser) -> None:
    p.add_argument("--classify", action="store_true",
                   help="the 2025 guidelines' view: precision, recall and F1 of the statements each turn cites "
                        "(SetP/SetR/SetF means over judged turns, and pooled P/R/F1_micro) instead of ranking measures")
    p.add_argument("--rel", type=int, default=1,
                   help="with --classify: the lowest relevant grade, as ir-measures' rel=N (default %(default)s; "
                        "2025 NIST PTKB grades are 0-4, 2023/2024 ones 0/1)")


def _ptkb_inputs(args: argparse.Namespace) -> tuple[Run, str, Qrels, Topics | None]:
    """``eval --ptkb``'s run with its format, the PTKB qrels and the topics (if given), checked to fit each other."""
    from ikatkit.evaluate.ptkb_classify import check_run_fits_ptkb_qrels
    from ikatkit.evaluate.qrels import load_qrels
    from ikatkit.runs.io import load_records, read_run
    from ikatkit.topics import load_topics

    topics = load_topics(args.topics) if args.topics else None
    run = read_run(args.run, topics=topics)
    fmt = load_records(args.run)[0]
    qrels = load_qrels(args.qrels)
    check_run_fits_ptkb_qrels(run, fmt, qrels, topics.year if topics else None)
    return run, fmt, qrels, topics


def _ptkb_classification(args: argparse.Namespace) -> EvalResult:
    from ikatkit.evaluate.ptkb_classify import classify_ptkb

    run, fmt, qrels, topics = _ptkb_inputs(args)
    listed = fmt in ("dict", "trec")  # PTKB keys ranked or listed per turn: each one is cited
    cited = {t.turn_id: dict(t.ranking()) for t in run.turns} if listed else run
    result = classify_ptkb(cited, qrels, args.rel, topics, args.missing)
    statements = result.info["statements"]
    if statements.get("unmapped"):
        print(f"{statements['unmapped']} cited statements map to no PTKB key of their conversation (counted as "
              f"cited nothing), e.g. {statements['unmapped_examples']}", file=sys.stderr)
    return result


def _add_response_inputs(p: argparse.ArgumentParser) -> None:
    """The inputs of response measures, shared by eval-responses, compare and report."""
    p.add_argument("--references", help="reference responses: {turn: text} (2025 gold-response-nist.json), the 2024 "
                                        "gold-response JSON or topics (default: the topics' canonical responses)")
    p.add_argument("--nuggets", help="gold-nugget JSON: 2024 {turn: {\"[i]\": {\"text\", \"relevance\"}}}, 2025 "
                                     "nuggets-nist.json / nuggets-LLM.json {turn: [{\"text\", \"docid\"}]} "
                                     "(ungraded), or a gold-response JSON (the atomic nuggets each response lists)")
    grounding = p.add_mutually_exclusive_group()
    grounding.add_argument("--passages", help="passage texts (JSONL) of the responses' used passages")
    grounding.add_argument("--index", help="... or the Lucene index to look them up in")
    p.add_argument("--matcher", choices=["embedding", "llm"], default="embedding",
                   help="nugget matcher: MiniLM cosine (default) or an LLM judge (--llm-config)")
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                   help="cosine threshold of the embedding nugget matcher (default %(default)s, tuned: "
                        "bench/tune_nugget_threshold.py)")
    p.add_argument("--llm-config",
                   help="TOML or JSON of the judge LLM, as an llm resource: backend, model, base_url ...")
    p.add_argument("--rubrics", help="2025 rubric questions (the released rubrics.json, or rubrics.csv) for "
                                     "SimRubricScore / SimRubricCoverage (runs that record the simulated user's "
                                     "judgements) and RubricCoverage / RubricScore (an LLM judge: --llm-config)")
    p.add_argument("--sim-threshold", type=int, default=SIM_THRESHOLD,
                   help="a rubric the simulated user scored above this (0-5) is covered (default %(default)s: the "
                        "organizers' simulator moves on above 3)")
    _add_unreached(p)
    p.add_argument("--bertscore-model", default=DEFAULT_MODEL, help="BERTScore model (hub id, folder or bundled:*)")
    p.add_argument("--bertscore-layer", type=int, help="BERTScore layer (default: bert-score's, else the last)")
    p.add_argument("--cache", help="cache folder, as for `ikatkit run`: the judge's outputs go to its llm/ "
                                   "(default: $IKATKIT_CACHE, else .cache/ikatkit "
                                   "in a checkout, else ~/.cache/ikatkit)")


def _response_options(args: argparse.Namespace) -> dict:
    """evaluate_response_runs keyword arguments from the shared response options."""
    from ikatkit.evaluate.responses.evaluate import ResponseScorers
    from ikatkit.evaluate.responses.nuggets import LlmMatcher
    from ikatkit.topics import load_topics

    scorers = ResponseScorers(bert_model=args.bertscore_model, bert_layer=args.bertscore_layer,
                              nugget_threshold=args.threshold, sim_threshold=args.sim_threshold,
                              unreached=args.unreached)
    if args.matcher == "llm" and not args.llm_config:
        raise IkatError("the LLM matcher needs --llm-config", where="--matcher llm",
                        fix="pass a TOML/JSON file with backend and model (e.g. backend = \"openai\", base_url)")
    if args.llm_config:
        from ikatkit.llm import command_llm

        # the judge of the rubric measures, and of nuggets with --matcher llm
        scorers.llm = command_llm(args.llm_config, None, args.cache)
        if args.matcher == "llm":
            scorers.matcher = LlmMatcher(scorers.llm)
    return {"topics": load_topics(args.topics) if args.topics else None, "references": args.references,
            "nuggets": args.nuggets, "passages": args.passages, "index": args.index, "rubrics": args.rubrics,
            "scorers": scorers}


def _add_eval_responses(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval-responses", help="evaluate runs' responses: reference, grounding and nugget measures")
    p.add_argument("runs", nargs="+", help="runs in any supported format, or the 2024 participant-/gold-response "
                                           "JSON (one run per run id); NAME=PATH names a single run")
    p.add_argument("--topics", help="topics: the turns that exist and their canonical responses (references)")
    _add_response_inputs(p)
    p.add_argument("--measures", nargs="+",
                   help="response measures (default: all the given inputs allow); see docs/evaluation.md")
    p.add_argument("--per-query", action="store_true", help="also print per-turn values")
    p.add_argument("--missing", choices=MISSING, default=MISSING[0],
                   help="turns with a reference or nuggets the run lacks: listed, or scored as an empty response")
    _add_by_user_type(p)
    p.add_argument("--format", choices=["tsv", "json"], default="tsv")
    p.add_argument("--out", help="write the result here instead of standard output")

    def run(args: argparse.Namespace) -> int:
        from ikatkit.atomic import write_text
        from ikatkit.evaluate.responses.data import read_named_response_runs
        from ikatkit.evaluate.responses.evaluate import evaluate_response_runs

        options = _response_options(args)
        runs = read_named_response_runs(args.runs, options["topics"])
        results = evaluate_response_runs(runs, measures=args.measures, missing=args.missing, **options)
        if args.by == "user-type":
            return _responses_by_type(args, runs, results, options)
        if args.format == "json":
            text = json.dumps({name: r.to_json(args.per_query) for name, r in results.items()}, indent=2) + "\n"
        else:
            text = "".join(f"{name}\t" + line + "\n" for name, r in results.items()
                           for line in r.to_tsv(args.per_query).splitlines())
        if args.out:
            write_text(args.out, text)
        else:
            sys.stdout.write(text)
        for name, r in results.items():
            extra = "".join(f"; {w}" for w in [*r.info.get("warnings", []), r.info.get("sim_unreached")] if w)
            without = r.info.get("turns_without_nuggets")
            if without:
                extra += f"; {len(without)} turns without nuggets (no nugget measures): {', '.join(without[:5])}"
            dialogues = f" (and {len(r.info['dialogues'])} whole dialogues)" if r.info.get("dialogues") else ""
            print(f"{name}: {len(r.evaluated)} turns evaluated{dialogues}, {len(r.missing)} turns missing{extra}",
                  file=sys.stderr)
        return 0

    p.set_defaults(func=run)


def _responses_by_type(args: argparse.Namespace, runs: list, results: dict, options: dict) -> int:
    """``eval-responses --by user-type``: per run, the simulator's judgements per (user, rubric) and the per-turn
    measures' means over each type's turns, coverage beside them."""
    from ikatkit.atomic import write_text
    from ikatkit.evaluate.responses.measures import MEASURES
    from ikatkit.evaluate.responses.rubrics import read_rubrics
    from ikatkit.evaluate.user_types import ALL, require_types, sim_table

    if not args.rubrics:
        raise IkatError("--by user-type needs the rubrics the users pursued", where="--by user-type",
                        fix="pass --rubrics (rubrics.json, rubrics.csv or the topics file)")
    rubrics = read_rubrics(args.rubrics)
    topics = [c.id for c in options["topics"].conversations] if options["topics"] is not None else None
    user_types = _user_type_map(args)
    tables = {}
    for response_run in runs:
        result = results[response_run.name]
        types = require_types(list(response_run.responses), response_run.user_types, user_types, response_run.name)
        measures = list(result.mean)
        table = sim_table(response_run.judged, types, rubrics, measures, args.sim_threshold, args.unreached, topics)
        per_turn = [m for m in measures if MEASURES[m.split("[", 1)[0]].needs not in ("simulator", "rubrics")]
        for name, row in table.rows.items():  # means over the type's turns: rubric coverage does not apply
            for m in per_turn:
                column = [v[m] for q, v in result.per_query.items() if m in v and (name == ALL or types.get(q) == name)]
                row.mean[m] = sum(column) / len(column) if column else None
        table.measures += per_turn
        tables[response_run.name] = table
    if args.format == "json":
        text = json.dumps({name: t.to_json() for name, t in tables.items()}, indent=2) + "\n"
    else:
        text = "".join(f"{name}\t{line}\n" for name, t in tables.items() for line in t.to_tsv().splitlines())
    if args.out:
        write_text(args.out, text)
    else:
        sys.stdout.write(text)
    for name, table in tables.items():
        print(f"{name}: Sim measures per (user, rubric): means over "
              + ("every rubric (unreached: 0)" if args.unreached == "zero" else "the rubrics reached")
              + _rubrics_footer(table) + "; other measures: means over each type's turns", file=sys.stderr)
    return 0


def _add_compare(sub: argparse._SubParsersAction) -> None:
    for name, help_text in (("compare", "compare runs: measures, paired significance, wins/ties/losses, plots"),
                            ("report", "one self-contained HTML report comparing runs (e.g. manual vs automatic)")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("runs", nargs="+", help="runs in any supported format; NAME=PATH sets the name")
        p.add_argument("--qrels", help="passage qrels (ranking measures); leave out to compare responses only")
        p.add_argument("--ptkb-qrels", help="also compare the runs' PTKB rankings")
        p.add_argument("--topics", help="topics file: maps PTKB statement texts (2025 runs) to keys; its canonical "
                                        "responses are the references of response measures")
        p.add_argument("--baseline", help="the run the others are tested against (default: the first)")
        p.add_argument("--measures", nargs="+", help="ir-measures names (default: the track's measures) and response "
                                                     "measures (ROUGE-L, NuggetRecall ...: compared as a second table)")
        p.add_argument("--test", choices=TESTS, default=TESTS[0])
        p.add_argument("--correction", choices=CORRECTIONS, default=CORRECTIONS[0])
        p.add_argument("--missing", choices=MISSING, default=MISSING[0],
                       help="judged turns a run lacks: skip them (trec_eval) or score them 0")
        p.add_argument("--all-pairs", action="store_true",
                       help="also test every pair of runs (corrected over all pairs and measures)")
        p.add_argument("--out", required=name == "report", help="folder for tables, plots (and the report)")
        if name == "report":
            p.add_argument("--viewer", help="the folder of `ikatkit view` of these runs: the plots' turn positions "
                                            "and conversations link to their turns there (default: OUT/viewer when "
                                            "it holds one)")
        _add_response_inputs(p)
        p.set_defaults(func=_run_compare, report=name == "report")


def _run_compare(args: argparse.Namespace) -> int:
    from ikatkit.evaluate.compare import compare_ptkb, compare_responses, compare_runs
    from ikatkit.evaluate.report import write_comparison, write_report
    from ikatkit.evaluate.responses.data import read_named_response_runs
    from ikatkit.evaluate.responses.measures import is_response_measure
    from ikatkit.runs.io import named_path
    from ikatkit.topics import load_topics

    runs = {name or Path(path).stem: path for name, path in map(named_path, args.runs)}
    baseline = args.baseline if args.baseline in runs or args.baseline is None else Path(args.baseline).stem
    topics = load_topics(args.topics) if args.topics else None
    ranking_measures = [m for m in args.measures or [] if not is_response_measure(m)]
    response_measures = [m for m in args.measures or [] if is_response_measure(m)]
    if ranking_measures and not args.qrels:
        raise IkatError(f"ranking measures {ranking_measures} need --qrels",
                        fix="pass --qrels or only response measures")
    if not args.qrels and not (response_measures or args.nuggets or args.references or topics):
        raise IkatError("nothing to compare", where="compare",
                        fix="pass --qrels (rankings) and/or response inputs (--topics, --references, --nuggets)")
    responses = None
    if response_measures or args.nuggets or args.references or not args.qrels:
        response_options = _response_options(args)
        responses = compare_responses(read_named_response_runs(args.runs, topics), baseline=baseline,
                                      measures=response_measures or None, test=args.test,
                                      correction=args.correction, missing=args.missing, all_pairs=args.all_pairs,
                                      **response_options)
        for said in dict.fromkeys(r.info["sim_unreached"] for r in responses.results.values()
                                  if "sim_unreached" in r.info):
            print(said, file=sys.stderr)
    options = {"baseline": baseline, "measures": ranking_measures or None, "test": args.test,
               "correction": args.correction, "missing": args.missing, "all_pairs": args.all_pairs}
    qrels = args.qrels if args.qrels and (ranking_measures or not response_measures) else None
    if args.report:
        path = write_report(runs, qrels, Path(args.out), ptkb_qrels=args.ptkb_qrels, topics=topics,
                            responses=responses, viewer=Path(args.viewer) if args.viewer else None, **options)
        print(f"report: {path}")
        return 0
    titles = {"": "", "ptkb_": "PTKB statement ranking\n", "responses_": "Responses\n"}
    steps = []
    if qrels:
        steps.append(("", lambda: compare_runs(runs, qrels, **options)))
        if args.ptkb_qrels:
            steps.append(("ptkb_", lambda: compare_ptkb(runs, args.ptkb_qrels, topics,
                                                        **{**options, "measures": None})))
    if responses is not None:
        steps.append(("responses_", lambda: responses))
    for prefix, make in steps:  # each table printed before the next is computed: one that fails leaves the others
        comparison = make()
        print(titles[prefix] + comparison.to_markdown() + "\n")
        if args.out:
            files = write_comparison(comparison, Path(args.out), prefix=prefix)
            tables = [files[k] for k in ("markdown", "csv", "latex", "per_turn", "per_conversation", "pairs")
                      if k in files]
            print(f"tables and plots in {args.out}: " + ", ".join(Path(f).name for f in [*tables, *files["plots"]])
                  + "\n")
    return 0
