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


# inputs that expand, numbers outside their type, values that were silently replaced
def _laughs(levels: int = 9) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines + [f"train: {{seed: *a{levels}}}"]) + "\n"


def _short(ran, limit: int = 2000) -> Outcome:
    """judge_error, and a message that does not echo a huge value (else noted as not naming it)."""
    out = judge_error(ran)
    if len(str(ran.error or "")) > limit:
        out.detail = f"{out.detail[:200]} [does not name the key: a message of {len(str(ran.error)):,} characters]"
    return out


@case("config-alias-bomb", "--config of 600 bytes whose nested aliases expand to 10**10 values; train", timeout_s=30)
def _alias_bomb(ctx: Ctx) -> Outcome:
    f = ctx.tmp / "c.yaml"
    f.write_text(_laughs())
    ran = ctx.cli("train", "--config", f, "--dataset", ctx.dataset(), "--record", ctx.tmp / "r.json")
    out = _short(ran)
    if "aliases" not in str(ran.error or ""):
        out.detail += " [does not name the aliases]"
    return out


@case("config-duplicate-key", "--config giving train.seed twice; train")
def _dup_key(ctx: Ctx) -> Outcome:
    f = ctx.tmp / "c.yaml"
    f.write_text("train:\n  seed: 1\n  epochs: 1\n  seed: 3\n")
    return judge_error(ctx.cli("train", "--config", f, "--dataset", ctx.dataset(), "--record", ctx.tmp / "r.json"),
                       names="train.seed")


@case("config-huge-value", "--config with a 10 MB string where train.seed goes; train")
def _huge_value(ctx: Ctx) -> Outcome:
    f = ctx.tmp / "c.yaml"
    f.write_text("train:\n  seed: '" + "x" * 10_000_000 + "'\n")
    out = _short(ctx.cli("train", "--config", f, "--dataset", ctx.dataset(), "--record", ctx.tmp / "r.json"))
    return out


for _name, _what, _args, _key in [
    ("negative-seed", "--seed -1", ["--seed", "-1"], "train.seed"),
    ("huge-seed", "--seed 10**20", ["--seed", str(10**20)], "train.seed"),
    ("infinite-timeout", "--set distributed.timeout_s=.inf", ["--set", "distributed.timeout_s=.inf"],
     "distributed.timeout_s"),
    ("overflowing-number", "--set train.accelerator_scale=1e400", ["--set", "train.accelerator_scale=1e400"],
     "train.accelerator_scale"),
    ("huge-capacity-bytes", "--set cache.capacity_bytes=10**24", ["--set", f"cache.capacity_bytes={10**24}"],
     "cache.capacity_bytes"),
    ("capacity-beyond-memory", "--set cache.capacity_bytes=10**14 (beyond this machine's memory)",
     ["--set", f"cache.capacity_bytes={10**14}"], "cache.capacity_bytes"),
    ("zero-batch", "--batch-size 0", ["--batch-size", "0"], "sampler.batch_size"),
    ("zero-devices", "--devices 0", ["--devices", "0"], "distributed.devices"),
]:
    def _num_case(ctx: Ctx, _args=_args, _key=_key) -> Outcome:
        rec = ctx.tmp / "run.json"
        return judge_error(ctx.train(ctx.dataset(), rec, *_args), rec, names=_key)
    case(f"config-{_name}", f"{_what}; train")(_num_case)


for _opt in ("--batch-size", "--devices", "--seed"):
    def _sim_zero(ctx: Ctx, _opt=_opt) -> Outcome:
        value = "-1" if _opt == "--seed" else "0"
        return judge_error(ctx.cli("simulate", ctx.dataset(), "--trace-only", "--max-batches", "1", "--fanouts", "2,2",
                                   _opt, value), names=_opt)
    case(f"simulate-zero{_opt[1:]}" if _opt != "--seed" else "simulate-negative-seed",
         "simulate --seed -1" if _opt == "--seed" else f"simulate {_opt} 0 (0 ran with the config's value)")(_sim_zero)
