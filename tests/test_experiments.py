"""experiments.sweep: deterministic rows, ERROR rows, cache resume, Dask executor, sweep files."""

import concurrent.futures as cf
import math

import pandas as pd
import pytest

from slackswap import experiments, planners
from slackswap.core.errors import ConfigError
from slackswap.core.plan import Decision
from slackswap.experiments import RunRow, load_sweep, run_sweep_file, sweep

BUDGETS = [0.6, 0.9]
PLANNERS = ["keep-all", "slack", "chen-sqrt"]


def _cmp(df):
    return df.drop(columns=list(experiments.WALL_COLUMNS)).reset_index(drop=True)


def test_columns_are_the_runrow_fields_in_grid_order():
    df = sweep("tiny", "a100-80gb", BUDGETS, PLANNERS, workers=1, progress=False)
    assert list(df.columns) == list(RunRow.__dataclass_fields__)
    assert list(zip(df["budget"], df["planner"], strict=True)) == [(b, p) for b in BUDGETS for p in PLANNERS]
    keep = df[(df["planner"] == "keep-all") & (df["budget"] == 0.6)].iloc[0]
    assert keep["status"] == "INFEASIBLE" and not keep["fits"] and keep["throughput_ratio"] == 0.0
    slack = df[(df["planner"] == "slack") & (df["budget"] == 0.9)].iloc[0]
    assert slack["fits"] and slack["peak_bytes"] <= slack["budget_bytes"]
    assert slack["n_keep"] + slack["n_swap"] + slack["n_recompute"] == 30  # tiny: 30 planning tensors
    assert math.isclose(slack["throughput_ratio"], slack["ideal_step_time_s"] / slack["step_time_s"])
    assert 0 < slack["lower_bound_s"] <= slack["step_time_s"] and slack["bound_how"]  # slackswap.bounds
    assert math.isclose(slack["gap_to_bound"], slack["step_time_s"] / slack["lower_bound_s"] - 1)


@pytest.fixture(scope="module")
def pool_rows():
    """The default pool's rows (2 worker processes), computed once for the tests that compare
    other executions with them."""
    return sweep("tiny", "a100-80gb", BUDGETS, PLANNERS, workers=2, progress=False)


def test_sweep_twice_gives_identical_rows_in_processes_and_in_process(pool_rows):
    a = pool_rows
    b = sweep("tiny", "a100-80gb", BUDGETS, PLANNERS, workers=2, progress=False)
    c = sweep("tiny", "a100-80gb", BUDGETS, PLANNERS, workers=1, progress=False)
    pd.testing.assert_frame_equal(_cmp(a), _cmp(b))
    pd.testing.assert_frame_equal(_cmp(a), _cmp(c))


def test_failed_runs_become_error_rows():
    def boom(problem):
        raise RuntimeError("planner exploded")

    planners.register("test-boom", lambda **kw: planners.FunctionPlanner("test-boom", boom))
    try:
        df = sweep("tiny", "a100-80gb", [0.05, 1.0], ["test-boom", "no-such-planner", "keep-all"],
                   overrides=[{}, {"attention": "sideways"}], workers=1, progress=False)
    finally:
        planners.unregister("test-boom")
    assert len(df) == 12
    ok = df[(df["overrides"] == "{}") & (df["budget"] == 1.0) & (df["planner"] == "keep-all")]
    assert ok["status"].tolist() == ["FEASIBLE"]
    err = df[df["status"] == "ERROR"]
    assert len(err) == 11
    msgs = err.set_index(["overrides", "budget", "planner"])["message"]
    assert msgs[("{}", 1.0, "test-boom")] == "RuntimeError: planner exploded"
    assert msgs[("{}", 1.0, "no-such-planner")].startswith("UnknownNameError: unknown planner 'no-such-planner'")
    assert "smallest feasible budget" in msgs[("{}", 0.05, "keep-all")]
    assert "attention" in msgs[('{"attention": "sideways"}', 1.0, "keep-all")]


def test_resumed_sweep_skips_finished_runs(tmp_path):
    calls = []

    def counted(problem):
        calls.append(problem.budget_bytes)
        return {t: Decision.KEEP for t in problem.planning_ids}

    planners.register("test-count", lambda **kw: planners.FunctionPlanner("test-count", counted))
    try:
        a = sweep("tiny", "a100-80gb", [0.9, 1.0], ["test-count"], workers=1, cache=tmp_path, progress=False)
        assert len(calls) == 2 and a.attrs == {"runs": 2, "cache_hits": 0, "computed": 2}
        b = sweep("tiny", "a100-80gb", [0.9, 1.0, 0.95], ["test-count"], workers=1, cache=tmp_path,
                  progress=False)
        assert len(calls) == 3 and b.attrs == {"runs": 3, "cache_hits": 2, "computed": 1}
        pd.testing.assert_frame_equal(a, b.iloc[:2])  # cached rows come back exactly, wall time too
        c = sweep("tiny", "a100-80gb", [0.9, 1.0, 0.95], ["test-count"], workers=1, cache=tmp_path,
                  progress=False)
        assert len(calls) == 3 and c.attrs["cache_hits"] == 3
        pd.testing.assert_frame_equal(b, c)
    finally:
        planners.unregister("test-count")


def test_dask_executor_gives_the_same_rows(pool_rows):
    """Runs shipped to a Dask worker process (pickled there and back) give the rows of the
    default pool; every run is a task that ran in the worker process, none in this one. (One
    worker: the shipping and pickling are the same with two, and a second process costs its
    imports, about 3 s of CPU, in every test run.)"""
    import os

    from distributed import Client, LocalCluster, get_task_stream

    default = pool_rows   # sweep("tiny", "a100-80gb", BUDGETS, PLANNERS, progress=False)
    with (LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
          Client(cluster) as client, get_task_stream(client) as stream):
        dask = sweep("tiny", "a100-80gb", BUDGETS, PLANNERS, executor=client.get_executor(), progress=False)
        pids = client.run(os.getpid)
    pd.testing.assert_frame_equal(_cmp(default), _cmp(dask))
    assert len(pids) == 1 and os.getpid() not in pids.values()
    ran = [t for t in stream.data if t.get("status") != "error"]
    assert len(ran) >= len(BUDGETS) * len(PLANNERS)
    assert {t["worker"] for t in ran} <= set(pids)


def test_variants_links_and_overrides_expand_the_grid():
    df = sweep("tiny", "a100-80gb", 0.9, ["slack"], planner_params=[("slack-size", "slack", {"order": "size"})],
               link=["pcie3", {"bandwidth": "100GB/s"}], overrides=[{"batch": 1}, {"batch": 2}], workers=1,
               progress=False, bound=False)
    assert len(df) == 2 * 2 * 2
    assert df["label"].tolist()[:2] == ["slack", "slack-size"]
    assert df["params"].tolist()[:2] == ["{}", '{"order": "size"}']
    assert df["link"].tolist()[::4] == ["pcie3", '{"bandwidth": "100GB/s"}']
    assert df["overrides"].tolist()[:4] == ['{"batch": 1}'] * 2 + ['{"batch": 2}'] * 2
    with pytest.raises(ConfigError, match="duplicate labels"):
        sweep("tiny", "a100-80gb", 0.9, ["slack"], planner_params=[("slack", "slack", {})], workers=1)


def test_gap_to_milp_is_filled_within_a_setting():
    base = dict(model="m", hardware="h", link="l", overrides="{}", params="{}", version="v", budget_bytes=1.0)
    rows = [RunRow(**base, budget=0.5, planner="slack", label="slack", status="FEASIBLE", fits=True, step_time_s=1.2),
            RunRow(**base, budget=0.5, planner="milp", label="milp", status="OPTIMAL", fits=True, step_time_s=1.0),
            RunRow(**base, budget=0.7, planner="slack", label="slack", status="FEASIBLE", fits=True, step_time_s=1.1)]
    from dataclasses import asdict

    df = experiments.finish(pd.DataFrame([asdict(r) for r in rows]))
    assert df["gap_to_milp"].iloc[0] == pytest.approx(0.2)
    assert df["gap_to_milp"].iloc[1] == 0.0
    assert math.isnan(df["gap_to_milp"].iloc[2])  # no MILP at budget 0.7


def test_load_sweep_rejects_unknown_keys_and_expands_budget_ranges(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text('models = ["tiny"]\nbudgets = {start = 0.5, stop = 0.7, step = 0.1}\nplanners = ["slack"]\n')
    cfg = load_sweep(p)
    assert cfg["budgets"] == [0.5, 0.6, 0.7] and cfg["hardware"] == ["a100-80gb"] and cfg["by"] == "budget"
    p.write_text('models = ["tiny"]\nbudgets = [0.5]\nplanners = ["slack"]\nbudjet = 3\n')
    with pytest.raises(ConfigError, match="^s.toml: budjet: unknown key; allowed: bound, budgets"):
        load_sweep(p)
    p.write_text('models = ["tiny"]\nbudgets = [0.5]\n[[variants]]\nlabel = "a"\nplanner = "slack"\nparam = {}\n')
    with pytest.raises(ConfigError, match=r"^s.toml: variants\[0\].param: unknown key; allowed: label, params, planner$"):
        load_sweep(p)
    with pytest.raises(ConfigError, match="does not exist"):
        load_sweep(tmp_path / "missing.toml")


def test_run_sweep_file_writes_csv(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text('models = ["tiny"]\nbudgets = [0.9]\nplanners = ["keep-all", "chen-sqrt"]\nworkers = 1\n')
    df = run_sweep_file(p, out=tmp_path / "out" / "r.csv", progress=False)
    back = pd.read_csv(tmp_path / "out" / "r.csv")
    assert back["planner"].tolist() == df["planner"].tolist() == ["keep-all", "chen-sqrt"]


@pytest.mark.parametrize("path", sorted(experiments.sweeps_dir().glob("*.toml")), ids=lambda p: p.stem)
def test_shipped_sweep_files_load_and_name_registered_planners(path):
    cfg = load_sweep(path)
    grid = experiments.grid(**{k: cfg[k] for k in ("models", "hardware", "budgets", "planners", "overrides",
                                                   "planner_params", "link")})
    known = set(planners.available())
    assert {s.planner for s in grid} <= known, sorted({s.planner for s in grid} - known)
    for s in {(s.planner, tuple(sorted(s.params.items()))) for s in grid}:
        planners.get(s[0], **dict(s[1]))  # parameters accepted


def test_run_problems_compares_heuristics_with_the_exact_optimum():
    from slackswap.experiments import synthetic

    problems = synthetic.exact_suite(levels=(0.0, 0.5))
    df = experiments.run_problems(problems, ["slack", "dp-checkpoint", "milp"],
                                  planner_params=[("slack-size", "slack", {"order": "size"})])
    assert set(df["model"]) == {p.graph.name for p in problems}
    assert len(df) == len(problems) * 4
    milp = df[df["planner"] == "milp"]
    assert set(milp["status"]) <= {"OPTIMAL", "INFEASIBLE"} and (milp["status"] == "OPTIMAL").sum() >= 6
    ok = milp[milp["status"] == "OPTIMAL"]
    assert (ok["planner_bound_s"] - ok["step_time_s"]).abs().max() <= 1e-6 * ok["step_time_s"].max()
    fit = df[df["fits"] & (df["planner"] != "milp")]
    assert fit["gap_to_milp"].notna().all() and (fit["gap_to_milp"] >= -1e-9).all()   # nobody beats the optimum
    assert (df["lower_bound_s"] <= df["step_time_s"] * (1 + 1e-9))[df["fits"]].all()


def test_run_problems_turns_bad_input_into_rows_and_errors():
    from slackswap.core.errors import SlackSwapError
    from slackswap.experiments import synthetic

    p = synthetic.exact_suite(levels=(0.5,))[0]
    df = experiments.run_problems({"one": p}, ["slack"], planner_params={"slack": {"order": "nope"}}, bound=False)
    assert df["status"].tolist() == ["ERROR"] and "order" in df["message"].iloc[0]
    assert df["model"].tolist() == ["one"] and df["lower_bound_s"].isna().all()
    with pytest.raises(SlackSwapError, match="levels"):
        synthetic.exact_suite(levels=(1.5,))
    with pytest.raises(SlackSwapError, match="transfer_scale"):
        synthetic.exact_suite(transfer_scale=0)


# ---------------------------------------------------------------- cache keys, error rows, paths
def _hardware_copy(tmp_path, memory="80GiB"):
    from slackswap.core.paths import data_dir

    hw = tmp_path / "hw.toml"
    hw.write_text((data_dir() / "hardware" / "a100-80gb.toml").read_text().replace('memory = "80GiB"',
                                                                                 f'memory = "{memory}"'))
    return hw


def test_editing_a_hardware_file_misses_the_cache_and_the_process_memory(tmp_path):
    hw = _hardware_copy(tmp_path)
    args = dict(workers=1, progress=False, bound=False)
    a = sweep("tiny", str(hw), [0.4], ["swap-all"], cache=tmp_path / "c", **args)
    assert a.attrs["computed"] == 1
    assert sweep("tiny", str(hw), [0.4], ["swap-all"], cache=tmp_path / "c", **args).attrs["cache_hits"] == 1
    hw.write_text(hw.read_text().replace('link = "pcie4-x16"', 'link = "pcie3-x16"'))
    b = sweep("tiny", str(hw), [0.4], ["swap-all"], cache=tmp_path / "c", **args)
    assert b.attrs == {"runs": 1, "cache_hits": 0, "computed": 1}
    assert b["link"].iloc[0] == "pcie3-x16" and b["step_time_s"].iloc[0] > a["step_time_s"].iloc[0]
    c = sweep("tiny", str(hw), [0.4], ["swap-all"], **args)   # no cache: this process's problems
    assert c["step_time_s"].iloc[0] == b["step_time_s"].iloc[0]


def test_editing_a_link_file_misses_only_the_runs_that_read_it(tmp_path, monkeypatch):
    import shutil

    from slackswap.core import hardware
    from slackswap.core.paths import data_dir

    shutil.copytree(data_dir() / "hardware", tmp_path / "hardware")
    monkeypatch.setattr(hardware, "hardware_dir", lambda: tmp_path / "hardware")
    args = dict(link=["pcie4-x16", "pcie5-x16"], workers=1, progress=False, bound=False, cache=tmp_path / "c")
    a = sweep("tiny", "a100-80gb", [0.4], ["swap-all"], **args)
    p5 = tmp_path / "hardware" / "links" / "pcie5-x16.toml"
    text = p5.read_text()
    assert 'd2h_bandwidth = "' in text
    p5.write_text(text.replace('d2h_bandwidth = "', 'd2h_bandwidth = "1', 1))
    b = sweep("tiny", "a100-80gb", [0.4], ["swap-all"], **args)
    assert b.attrs["cache_hits"] == 1 and b.attrs["computed"] == 1
    pd.testing.assert_frame_equal(a.iloc[:1], b.iloc[:1])          # pcie4: from the cache
    assert b["step_time_s"].iloc[1] != a["step_time_s"].iloc[1]   # pcie5: recomputed


def test_cache_and_sweep_paths_expand_the_home_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    sweep("tiny", "a100-80gb", [0.9], ["keep-all"], workers=1, progress=False, bound=False, cache="~/runs")
    assert len(list((tmp_path / "home" / "runs").glob("*.json"))) == 1
    assert not (tmp_path / "work" / "~").exists()
    sf = tmp_path / "home" / "s.toml"
    sf.write_text('models = ["tiny"]\nbudgets = [0.9]\nplanners = ["keep-all"]\nbound = false\nworkers = 1\n')
    run_sweep_file("~/s.toml", out="~/out/rows.csv", progress=False)
    assert (tmp_path / "home" / "out" / "rows.csv").exists() and not (tmp_path / "work" / "~").exists()


class _LostWorkers(cf.Executor):
    """Every submitted run fails as a crashed worker process would."""

    def submit(self, fn, /, *args, **kwargs):
        fut = cf.Future()
        fut.set_exception(RuntimeError("worker died"))
        return fut


def test_a_lost_worker_row_keeps_every_setting_of_its_run():
    from slackswap import Problem, report

    in_bytes = int(Problem.build("tiny", "a100-80gb", 0.8).budget_bytes)
    ok = sweep("tiny", "a100-80gb", [0.6, in_bytes], ["keep-all"], workers=1, progress=False, bound=False)
    df = sweep("tiny", "a100-80gb", [0.6, in_bytes], ["keep-all"], executor=_LostWorkers(), progress=False,
               bound=False)
    assert df["status"].tolist() == ["ERROR", "ERROR"] and df["message"].iloc[0] == "RuntimeError: worker died"
    cols = ["model", "hardware", "link", "budget", "budget_bytes", "planner", "label", "params", "overrides"]
    pd.testing.assert_frame_equal(df[cols], ok[cols])
    both = pd.concat([ok, df.assign(label="lost")], ignore_index=True)
    assert len(report.ablation_table(both, by="budget")) == 2   # no row of NaN budget or empty link


def test_static_memory_above_the_gpu_is_a_warning_in_every_row(tmp_path):
    from slackswap.core.errors import CapacityWarning

    hw = _hardware_copy(tmp_path, memory="1MiB")
    with pytest.warns(CapacityWarning, match="alone exceeds the 1.00 MiB"):
        df = sweep("tiny", str(hw), [0.5, 0.9], ["slack"], workers=1, progress=False, bound=False)
    assert df["warning"].str.contains("static memory").all()
    assert (sweep("tiny", "a100-80gb", 0.9, ["slack"], workers=1, progress=False, bound=False)["warning"] == "").all()
