"""groupd.daemon._GcTuner: survivors of a full collection are frozen; once a while they are unfrozen."""

import gc

from groupd.daemon import _GcTuner


def test_full_collection_freezes_survivors_and_unfreezes_after_interval() -> None:
    assert gc.get_freeze_count() == 0
    tuner = _GcTuner(full_every_s=3600.0)
    try:
        keep = [[i] for i in range(1000)]  # tracked, long-lived
        tuner._on_gc("stop", {"generation": 1, "collected": 0, "uncollectable": 0})
        assert gc.get_freeze_count() == 0  # young collections leave the generations alone
        tuner._on_gc("start", {"generation": 2, "collected": 0, "uncollectable": 0})
        assert gc.get_freeze_count() == 0
        tuner._on_gc("stop", {"generation": 2, "collected": 0, "uncollectable": 0})
        assert gc.get_freeze_count() >= len(keep)
        tuner.last_full -= 3600.0  # the interval has passed: the whole heap is scanned again
        tuner._on_gc("stop", {"generation": 2, "collected": 0, "uncollectable": 0})
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()


def test_install_raises_gen0_threshold_only() -> None:
    before = gc.get_threshold()
    tuner = _GcTuner(threshold0=5_000)
    try:
        tuner.install()
        assert gc.get_threshold() == (5_000, before[1], before[2])
        assert tuner._on_gc in gc.callbacks
    finally:
        gc.callbacks.remove(tuner._on_gc)
        gc.set_threshold(*before)
        gc.unfreeze()
