"""Tests never reach the network and run on the tiny profile unless a test says otherwise."""
import os
import sys
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("WORKSHOP_PROFILE", "tiny")
os.environ.setdefault("MPLBACKEND", "Agg")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "scripts"))  # what a script imports beside it (scripts/cli_common.py), last on the path


@pytest.fixture(scope="session")
def tiny():
    """The tiny profile, loaded once for the whole session (fp32 on CPU)."""
    from helpers.measure import models

    return models.load("tiny", device="cpu")


@pytest.fixture(scope="session")
def tiny_config():
    from helpers.measure.local_models import TINY_CONFIG

    return dict(TINY_CONFIG)


@pytest.fixture(scope="session")
def tiny_trained():
    """The tiny-trained profile, loaded once for the whole session (fp32 on CPU). The first use on a
    machine trains it (about a minute on two idle cores, helpers.measure.training); later sessions, the
    notebooks included, reuse the cached build."""
    from helpers.measure import models

    return models.load("tiny-trained", device="cpu")
