"""Measure `pipeline tune reuters`: what the median pruner saves and buys, and what a second worker gives.

Runs the real command (`python -m pipeline tune reuters ...`, one process per study, the code
of the checkout this script is in) on prepared Reuters data, each study with its own MLflow
store (MLFLOW_TRACKING_URI=sqlite:///OUT/<run>/mlflow.db) and so its own journal
(OUT/<run>/optuna.journal, the default beside mlflow.db), then reads the journal with Optuna.

1. Pruning: the same study (seed, TPE sampler, trials, epochs) with `tune.reuters.pruner=median`
   and with `pruner=none`, alternating (median, none, median, none, ...). For each: the best
   value (the study's best val_accuracy), the trials by state, the epochs trained (the sum of
   each trial's intermediate values: one per epoch it trained), the wall time of the whole
   process; and the best value the no-pruner study had reached within the epochs the pruned
   one used (its trials walked in order, summing epochs; a trial counts when it fits whole),
   and the epochs it needed to reach the pruned study's best value.
2. Workers: a fixed small study (`pruner=none`, so every trial is the same work) with
   `--workers 1` and `--workers 2`, alternating 1, 2, 1, 2, ...; the whole process's wall time,
   trials per hour, and per round the ratio of the two (2 workers' trials/hour over 1's).

Each run's stdout and stderr are kept in OUT/<run>/; the trial lines and the summary's counts
are checked against the journal, and the distinct lines of stderr are printed, so that what a
user would read is seen. Sizes default to less than params.yaml's (20 trials of 10 epochs, 5
start-up trials) so that the whole measurement takes about half an hour on 2 cores; pass 0 to
use params.yaml's. The host is noisy: compare modes side by side within one run of this
script. It prints figures only: nothing here is a pass or fail.

    cd /path/to/checkout && python benchmarks/tune.py --data data/prepared/reuters \\
        --trials 10 --epochs 5 --startup-trials 3 --pruning-rounds 1 \\
        --worker-trials 6 --worker-epochs 3 --worker-rounds 2
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import harness
from harness import ROOT

DATASET = "reuters"
TRIAL_LINE = re.compile(rf"^{DATASET} trial (\d+): (?:\S+ [0-9.]+ at epoch \d+ of (\d+)|pruned after epoch (\d+))")
SUMMARY_LINE = re.compile(r"^study \S+: (\d+) complete, (\d+) pruned, (\d+) failed of (\d+) trials")


def load_trials(journal: Path, study: str) -> list:
    import optuna
    import optuna.storages.journal

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(journal)))
    return sorted(optuna.load_study(study_name=study, storage=storage).trials, key=lambda t: t.number)


def tune(out: Path, label: str, study: str, overrides: list[str], data: Path, workers: int = 1) -> dict:
    """One `pipeline tune reuters` process in a store of its own; its figures from the journal."""
    folder = out / label
    folder.mkdir(parents=True)
    env = harness.mlflow_env(folder, tf_notices=True)
    sets = [arg for item in overrides for arg in ("-S", item)]
    command = harness.pipeline_argv(
        "tune", DATASET, "--study", study, "--data", data, "--workers", workers, *sets, quiet=False
    )
    (folder / "command.txt").write_text(" ".join(command) + "\n")
    result = harness.run(command, cwd=ROOT, env=env, check=False)
    wall = result.seconds
    ended = dt.datetime.now()
    (folder / "stdout.txt").write_text(result.out)
    (folder / "stderr.txt").write_text(result.err)
    figures: dict[str, Any] = {
        "label": label,
        "wall": wall,
        "code": result.code,
        "stdout": result.out,
        "stderr": result.err,
        "notes": [],
    }
    journal = folder / "optuna.journal"
    if not journal.exists():
        figures["notes"].append(f"no journal at {journal}")
        figures.update(trials=[], states={}, epochs=0, best=None)
        return figures
    trials = load_trials(journal, study)
    states = collections.Counter(t.state.name for t in trials)
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    starts = [t.datetime_start for t in trials if t.datetime_start]
    finishes = [t.datetime_complete for t in trials if t.datetime_complete]
    figures.update(
        trials=trials,
        states=dict(states),
        epochs=sum(len(t.intermediate_values) for t in trials),
        best=max((t.value for t in complete), default=None),
        trial_seconds=sum(
            (t.datetime_complete - t.datetime_start).total_seconds()
            for t in trials
            if t.datetime_start and t.datetime_complete
        ),
        # from the first trial's start to the process's end, and after the last trial ended
        first_start_offset=wall - (ended - min(starts)).total_seconds() if starts else None,
        tail=(ended - max(finishes)).total_seconds() if finishes else None,
    )
    figures["notes"] += check_output(result.out, trials)
    return figures


def check_output(stdout: str, trials: list) -> list[str]:
    """Where the trial lines and the summary disagree with the journal."""
    notes, by_number = [], {t.number: t for t in trials}
    lines = [m for m in map(TRIAL_LINE.match, stdout.splitlines()) if m]
    finished = [t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]
    if len(lines) != len(finished):
        notes.append(f"{len(lines)} trial lines on stdout, {len(finished)} finished trials in the journal")
    for m in lines:
        trial = by_number.get(int(m.group(1)))
        if trial is None:
            notes.append(f"trial line for trial {m.group(1)}, which the journal does not have")
            continue
        said = int(m.group(2) or m.group(3))
        if said != len(trial.intermediate_values):
            notes.append(
                f"trial {trial.number}: stdout says {said} epochs, the journal has "
                f"{len(trial.intermediate_values)} intermediate values"
            )
    summary = next((m for m in map(SUMMARY_LINE.match, stdout.splitlines()) if m), None)
    if summary is None:
        notes.append("no summary line on stdout")
    else:
        counts = collections.Counter(t.state.name for t in trials)
        said_counts = tuple(int(g) for g in summary.groups()[:3])
        have = (counts["COMPLETE"], counts["PRUNED"], counts["FAIL"])
        if said_counts != have:
            notes.append(f"summary says complete/pruned/failed {said_counts}, the journal has {have}")
        if len(trials) != int(summary.group(4)):
            notes.append(f"the journal has {len(trials)} trials, the study asked for {summary.group(4)}")
    return notes


def budget_walk(trials: list, budget: int) -> tuple[float | None, int, int]:
    """The best complete value among the first trials whose epochs fit in `budget` whole; the
    epochs and trials that took."""
    best, used, count = None, 0, 0
    for trial in trials:
        epochs = len(trial.intermediate_values)
        if used + epochs > budget:
            break
        used += epochs
        count += 1
        if trial.state.name == "COMPLETE" and (best is None or trial.value > best):
            best = trial.value
    return best, used, count


def epochs_to_reach(trials: list, target: float | None) -> int | None:
    """The epochs (summed in trial order) after which a complete trial had reached `target`."""
    if target is None:
        return None
    used = 0
    for trial in trials:
        used += len(trial.intermediate_values)
        if trial.state.name == "COMPLETE" and trial.value >= target:
            return used
    return None


def fmt(value, spec=".4f", missing="-") -> str:
    return missing if value is None else format(value, spec)


def report_run(figures: dict) -> None:
    states = ", ".join(f"{k.lower()} {v}" for k, v in sorted(figures["states"].items()))
    print(
        f"  {figures['label']:<22} exit {figures['code']}  wall {figures['wall']:6.1f} s  "
        f"trials {len(figures['trials'])} ({states})  epochs {figures['epochs']}  best {fmt(figures['best'])}  "
        f"start-up {fmt(figures.get('first_start_offset'), '.1f')} s  after last trial "
        f"{fmt(figures.get('tail'), '.1f')} s",
        flush=True,
    )
    for note in figures["notes"]:
        print(f"    odd: {note}", flush=True)
    if figures["code"]:
        print("    stdout tail: " + " | ".join(figures["stdout"].splitlines()[-5:]), flush=True)
    seen = collections.Counter(line.rstrip() for line in figures["stderr"].splitlines() if line.strip())
    for line, count in seen.items():
        print(f"    stderr{f' (x{count})' if count > 1 else ''}: {line[:400]}", flush=True)


def configured_epochs(opts) -> int:
    if opts.epochs:
        return opts.epochs
    from pipeline.config.loading.loader import read_yaml

    return read_yaml(ROOT / "params.yaml")["train"][DATASET]["epochs"]


def pruning(opts, out: Path, data: Path, sizes: list[str]) -> None:
    print(
        f"\n== pruning: {opts.pruning_rounds} round(s) of median, none; {' '.join(sizes) or 'params.yaml sizes'}",
        flush=True,
    )
    results: dict[str, list[dict]] = {"median": [], "none": []}
    for round_ in range(1, opts.pruning_rounds + 1):
        for pruner in ("median", "none"):
            figures = tune(
                out,
                f"pruning-{round_}-{pruner}",
                f"bench-prune-{round_}-{pruner}",
                [*sizes, f"tune.{DATASET}.pruner={pruner}"],
                data,
            )
            results[pruner].append(figures)
            report_run(figures)
            if opts.show_trials:
                for t in figures["trials"]:
                    print(
                        f"      trial {t.number:>2} {t.state.name:<8} epochs {len(t.intermediate_values):>2}  "
                        f"value {fmt(t.value)}  "
                        f"last {fmt(list(t.intermediate_values.values())[-1] if t.intermediate_values else None)}"
                        f"  {t.params}",
                        flush=True,
                    )
    print(
        f"\n{'round':<7}{'pruner':<8}{'best':>8}{'complete':>10}{'pruned':>8}{'failed':>8}{'epochs':>8}"
        f"{'wall s':>9}{'s/epoch':>9}"
    )
    for round_ in range(opts.pruning_rounds):
        for pruner in ("median", "none"):
            f = results[pruner][round_]
            s = f["states"]
            print(
                f"{round_ + 1:<7}{pruner:<8}{fmt(f['best']):>8}{s.get('COMPLETE', 0):>10}{s.get('PRUNED', 0):>8}"
                f"{s.get('FAIL', 0):>8}{f['epochs']:>8}{f['wall']:>9.1f}"
                f"{fmt(f['wall'] / f['epochs'] if f['epochs'] else None, '.1f'):>9}"
            )
    last = configured_epochs(opts)
    for round_ in range(opts.pruning_rounds):
        late = [
            t.number
            for t in results["median"][round_]["trials"]
            if t.state.name == "PRUNED" and len(t.intermediate_values) >= last
        ]
        if late:
            print(
                f"round {round_ + 1}: median pruned {len(late)} trial(s) after their last epoch ({last}), "
                f"trained in full and their value dropped: trials {', '.join(map(str, late))}"
            )
    print(
        "\nsame budget of epochs (the no-pruner study's trials in order, whole trials within the pruned "
        "study's epochs):"
    )
    for round_ in range(opts.pruning_rounds):
        pruned, full = results["median"][round_], results["none"][round_]
        best, used, count = budget_walk(full["trials"], pruned["epochs"])
        reach = epochs_to_reach(full["trials"], pruned["best"])
        print(
            f"  round {round_ + 1}: median {fmt(pruned['best'])} in {pruned['epochs']} epochs; none "
            f"{fmt(best)} in its first {count} trials ({used} epochs), {fmt(full['best'])} in all "
            f"{full['epochs']} epochs; none reached median's best after "
            f"{fmt(reach, 'd', 'never')} epochs; epochs saved {1 - pruned['epochs'] / full['epochs']:.0%}, "
            f"wall saved {1 - pruned['wall'] / full['wall']:.0%}"
            if full["epochs"] and full["wall"]
            else f"  round {round_ + 1}: no figures (a study failed)"
        )


def workers(opts, out: Path, data: Path) -> None:
    sizes = [
        f"tune.{DATASET}.trials={opts.worker_trials}",
        f"train.{DATASET}.epochs={opts.worker_epochs}",
        f"tune.{DATASET}.pruner=none",
    ]
    modes = [1, 2]
    print(
        f"\n== workers: {opts.worker_rounds} round(s) of --workers {', '.join(map(str, modes))}; {' '.join(sizes)}",
        flush=True,
    )
    results: dict[int, list] = {m: [] for m in modes}
    for round_ in range(1, opts.worker_rounds + 1):
        for mode in modes:
            figures = tune(
                out, f"workers-{round_}-w{mode}", f"bench-workers-{round_}-w{mode}", sizes, data, workers=mode
            )
            results[mode].append(figures)
            report_run(figures)

    def per_hour(f):
        finished = f["states"].get("COMPLETE", 0) + f["states"].get("PRUNED", 0)
        return finished / f["wall"] * 3600 if f["wall"] else 0.0

    print(
        f"\n{'round':<7}{'workers':>8}{'wall s':>9}{'trials':>8}{'trials/h':>10}{'trial-s':>9}{'start-up s':>12}"
        f"{'tail s':>8}{'ratio w2/w1':>13}"
    )
    ratios = []
    for round_ in range(opts.worker_rounds):
        one, two = results[1][round_], results[2][round_]
        ratio = per_hour(two) / per_hour(one) if per_hour(one) else None
        if ratio is not None:
            ratios.append(ratio)
        for mode, f in ((1, one), (2, two)):
            print(
                f"{round_ + 1:<7}{mode:>8}{f['wall']:>9.1f}{len(f['trials']):>8}{per_hour(f):>10.1f}"
                f"{fmt(f.get('trial_seconds'), '.1f'):>9}{fmt(f.get('first_start_offset'), '.1f'):>12}"
                f"{fmt(f.get('tail'), '.1f'):>8}{(fmt(ratio, '.2f') if mode == 2 else ''):>13}"
            )
    for mode in modes:
        walls = [f["wall"] for f in results[mode]]
        print(
            f"--workers {mode}: median wall {statistics.median(walls):.1f} s, median trials/h "
            f"{statistics.median(per_hour(f) for f in results[mode]):.1f}  "
            f"(walls {', '.join(f'{w:.1f}' for w in walls)})"
        )
    if ratios:
        print(
            f"trials/h ratio, 2 workers over 1, per round: {', '.join(f'{r:.2f}' for r in ratios)}; "
            f"median {statistics.median(ratios):.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "prepared" / DATASET, help="prepared Reuters data")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the stores, journals and logs (default: a new temporary folder, kept)",
    )
    parser.add_argument(
        "--trials", type=int, default=10, help="tune.reuters.trials of the pruning studies (0: params.yaml's)"
    )
    parser.add_argument("--epochs", type=int, default=5, help="train.reuters.epochs of their trials (0: params.yaml's)")
    parser.add_argument("--startup-trials", type=int, default=3, help="tune.reuters.startup_trials (0: params.yaml's)")
    parser.add_argument("--pruning-rounds", type=int, default=1, help="rounds of median, none")
    parser.add_argument("--worker-trials", type=int, default=6)
    parser.add_argument("--worker-epochs", type=int, default=3)
    parser.add_argument("--worker-rounds", type=int, default=2, help="rounds of --workers 1, 2")
    parser.add_argument("--skip", choices=("pruning", "workers"), action="append", default=[])
    parser.add_argument("--show-trials", action="store_true", help="print each pruning study's trials")
    opts = parser.parse_args()
    data = opts.data.resolve()
    if not (data / "stats.json").exists():
        parser.error(f"--data {data}: no stats.json (run `dvc repro preprocess@{DATASET}` first)")
    out = (opts.out or Path(tempfile.mkdtemp(prefix="bench-tune-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    sizes = [
        f"{key}={value}"
        for key, value in (
            (f"tune.{DATASET}.trials", opts.trials),
            (f"train.{DATASET}.epochs", opts.epochs),
            (f"tune.{DATASET}.startup_trials", opts.startup_trials),
        )
        if value
    ]
    print(
        f"{harness.host_line()}; code {ROOT}; data {data}; runs in {out}",
        flush=True,
    )
    start = time.perf_counter()
    if "pruning" not in opts.skip:
        pruning(opts, out, data, sizes)
    if "workers" not in opts.skip:
        workers(opts, out, data)
    print(f"\nwhole measurement: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
