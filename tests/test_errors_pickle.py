"""Every SlackSwapError subclass survives pickling with the same type and message."""

import importlib
import pickle
import pkgutil

import pytest

from slackswap.core import errors


def _all_error_classes():
    """Every error class the package defines: all its modules imported first (torch's where torch
    is installed), so the list does not depend on what other test modules imported before; classes
    defined outside the package (a script's own subclass) are not the package's."""
    import slackswap

    for m in pkgutil.walk_packages(slackswap.__path__, "slackswap."):
        if m.name == "slackswap.__main__":   # runs the command line
            continue
        try:
            importlib.import_module(m.name)
        except ImportError:   # an optional extra that is not installed
            pass
    seen, todo = [], [errors.SlackSwapError]
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith("slackswap."):
            seen.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted(seen, key=lambda c: (c.__module__, c.__name__))


def _instance(cls):
    if issubclass(cls, errors.UnknownNameError):
        return cls("model", "gpt5", ["tiny", "small"], where="--models")
    return cls("f.csv: row 2: batch: expected an integer; got 2.5")


@pytest.mark.parametrize("cls", _all_error_classes(), ids=lambda c: c.__name__)
def test_error_round_trips_through_pickle(cls):
    err = _instance(cls)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert str(back) == str(err)


def _raise_in_worker(cls):
    raise _instance(cls)


def test_errors_cross_a_two_worker_process_pool():
    from concurrent.futures import ProcessPoolExecutor

    classes = _all_error_classes()
    with ProcessPoolExecutor(max_workers=2) as pool:
        futures = [(cls, pool.submit(_raise_in_worker, cls)) for cls in classes]
        for cls, fut in futures:
            with pytest.raises(cls) as info:
                fut.result(timeout=60)
            assert type(info.value) is cls
            assert str(info.value) == str(_instance(cls))


def test_sensitivity_unknown_model_with_two_workers_is_one_line(capsys):
    from slackswap.cli.app import main

    rc = main(["sensitivity", "--models", "gpt5", "--workers", "2"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.splitlines() == [
        "slackswap: error: unknown model 'gpt5'; known: bert-large, gpt2, gpt2-xl, gpt3-175b, llama-2-70b, llama-2-7b, llama-7b, tiny"
    ]
