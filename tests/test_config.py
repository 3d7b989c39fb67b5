"""Settings: every one has a default and help, and they come from the config file, then
the environment, then explicit overrides, each bad value named with its source."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from backtrail.config import SETTINGS, Config
from backtrail.errors import InvalidInput
from backtrail.store import HOME_ENV


def test_every_setting_has_a_default_and_help_text() -> None:
    names = [field.name for field in dataclasses.fields(Config)]
    assert [setting.name for setting in SETTINGS] == names
    for setting in SETTINGS:
        assert len(setting.help) > 20 and setting.help.endswith("."), setting.name
    assert {item["name"] for item in Config().describe()} == set(names)
    for required in (
        "data_dir", "busy_timeout_ms", "max_text_bytes", "embeddings", "model_dir",
        "embed_threads", "embed_sessions", "index_lock_timeout", "indexer_debounce",
        "passage_chars", "passage_overlap", "search_limit", "result_chars",
        "search_decay_half_life_days", "forgotten_decay_floor", "search_visit_weight",
        "forgotten_bm25_weight", "max_fact_key_chars", "max_fact_value_chars", "log_reads",
    ):  # fmt: skip
        assert required in names


def test_settings_come_from_the_file_then_the_environment_then_overrides(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        "passage_chars = 800\nsearch_limit = 7\nembeddings = false\n"
    )
    env = {"BACKTRAIL_SEARCH_LIMIT": "12", "BACKTRAIL_EMBEDDINGS": "yes",
           "BACKTRAIL_MODEL_DIR": "~/models"}  # fmt: skip
    config = Config.load(tmp_path, environ=env, overrides={"embeddings": False})
    assert config.passage_chars == 800  # file
    assert config.search_limit == 12  # environment beats the file
    assert config.embeddings is False  # overrides beat both
    assert config.model_dir == Path("~/models").expanduser()
    assert config.data_dir == tmp_path and config.index_dir == tmp_path / "index"
    assert Config.load(tmp_path, environ={}).search_limit == 7
    assert config.limits().max_text_bytes == 1_048_576


def test_a_json_config_file_works_and_bad_settings_name_their_source(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"result_chars": 500}))
    assert Config.load(tmp_path, environ={}).result_chars == 500
    (tmp_path / "config.json").write_text(json.dumps({"result_charz": 500}))
    with pytest.raises(InvalidInput, match="config.json"):
        Config.load(tmp_path, environ={})
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(InvalidInput, match="cannot be read"):
        Config.load(tmp_path, environ={})
    (tmp_path / "config.json").unlink()
    with pytest.raises(InvalidInput, match="BACKTRAIL_INDEXER_DEBOUNCE"):
        Config.load(tmp_path, environ={"BACKTRAIL_INDEXER_DEBOUNCE": "soon"})
    for overrides in ({"search_limit": "10"}, {"passage_chars": 10}, {"embeddings": 1},
                      {"passage_overlap": 900}, {"search_bm25_weight": 1.5},
                      {"synchronous": "sometimes"}, {"nonsense": 1}):  # fmt: skip
        with pytest.raises(InvalidInput):
            Config.load(tmp_path, environ={}, overrides=overrides)


def test_the_data_dir_follows_backtrail_home_unless_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))
    assert Config.load().data_dir == tmp_path / "home"
    assert Config.load(tmp_path / "flag").data_dir == tmp_path / "flag"
    assert Config().data_dir == tmp_path / "home"
    assert not (tmp_path / "home").exists()  # loading settings creates nothing
