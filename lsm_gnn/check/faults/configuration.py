"""Fault cases of the configuration: bad values, keys, YAML files; a window longer than the epoch."""

from __future__ import annotations

from lsm_gnn.check.faults.base import Ctx, Outcome, case, judge_error, judge_run


# configuration
@case("window-1000", "--window 1000 on an epoch of a few iterations; train", cheap=False, timeout_s=120)
def _window(ctx: Ctx) -> Outcome:
    ds = ctx.dataset()
    rec = ctx.tmp / "run.json"
    ran = ctx.train(ds, rec, "--window", "1000")

    def stated():
        text = ran.output.lower() + (rec.read_text().lower() if rec.exists() else "")
        return "window clamped" if "clamp" in text else None
    return judge_run(ran, stated)


for _name, _what, _args in [
    ("unknown-config-key", "--set cache.bogus=1", ["--set", "cache.bogus=1"]),
    ("wrong-config-type", "--set train.lr=fast", ["--set", "train.lr=fast"]),
    ("negative-batch", "--batch-size -4", ["--batch-size", "-4"]),
    ("zero-fanout", "--fanouts 0,4", ["--fanouts", "0,4"]),
    ("unknown-policy", "--policy clairvoyant", ["--policy", "clairvoyant"]),
    ("unknown-model", "--model transformer9", ["--model", "transformer9"]),
    ("negative-cache-fraction", "--cache-fraction -0.5", ["--cache-fraction", "-0.5"]),
    ("warmup-longer-than-epoch", "--warmup 500 --timed 1", ["--warmup", "500", "--timed", "1"]),
]:
    def _cfg_case(ctx: Ctx, _args=_args) -> Outcome:
        rec = ctx.tmp / "run.json"
        return judge_error(ctx.train(ctx.dataset(), rec, *_args), rec)
    case(f"config-{_name}", f"{_what}; train")(_cfg_case)


@case("config-file-not-yaml", "--config names a file of unbalanced brackets; train")
def _bad_yaml(ctx: Ctx) -> Outcome:
    f = ctx.tmp / "c.yaml"
    f.write_text("cache: [1, 2\ntrain: {")
    return judge_error(ctx.cli("train", "--config", f, "--dataset", ctx.dataset(), "--record", ctx.tmp / "r.json"),
                       names="c.yaml")


@case("config-file-missing", "--config names no file; train")
def _no_yaml(ctx: Ctx) -> Outcome:
    return judge_error(ctx.cli("train", "--config", ctx.tmp / "none.yaml", "--dataset", ctx.dataset()),
                       names="none.yaml")
