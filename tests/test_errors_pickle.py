"""Every SlackSwapError subclass survives pickling with the same type and message."""

import pickle

import pytest

from slackswap.core import errors


def _all_error_classes():
    seen, todo = [], [errors.SlackSwapError]
    while todo:
        cls = todo.pop()
        seen.append(cls)
        todo.extend(cls.__subclasses__())
    return seen


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
