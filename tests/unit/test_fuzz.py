"""``voice bench fuzz``: libFuzzer (atheris) finds no input that breaks the protocol decoder."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

from voice.bench import fuzz
from voice.errors import VoiceError


def test_the_decoder_survives_a_short_fuzzing_run() -> None:
    report = fuzz.fuzz_protocol(runs=2000, seconds=20)
    assert report["crashes"] == 0, report.get("log_tail")
    assert report["crash_inputs"] == []
    assert report["exit_code"] == 0
    assert report["executions"] > 0
    assert report["coverage"]["cov"]  # the decoder was instrumented
    assert report["atheris"] == metadata.version("atheris")


def test_without_atheris_the_error_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    with pytest.raises(VoiceError) as caught:
        fuzz.fuzz_protocol(runs=10, seconds=1)
    assert "pip install atheris" in str(caught.value)


LOG = """\
INFO: Seed: 1
#2\tINITED cov: 7 ft: 7 corp: 1/1b exec/s: 0 rss: 56Mb
#4096\tpulse  cov: 40 ft: 70 corp: 18/2Kb lim: 43 exec/s: 2048 rss: 57Mb
#8192\tDONE   cov: 42 ft: 78 corp: 21/3Kb lim: 80 exec/s: 4096 rss: 57Mb
Done 8192 runs in 2 second(s)
stat::number_of_executed_units: 8192
stat::average_exec_per_sec:     4096
stat::new_units_added:          20
stat::slowest_unit_time_sec:    0
stat::peak_rss_mb:              57
"""


def test_the_report_reads_libfuzzer_statistics_and_artifacts(tmp_path: Path) -> None:
    (tmp_path / "crash-abc").write_bytes(b"[[[[")
    (tmp_path / "not-a-finding").write_bytes(b"x")
    report = fuzz._report(LOG, 1, tmp_path, 2.04, 10000, 30, "3.0.0")
    assert report["executions"] == 8192 and report["exec_per_second"] == 4096
    assert report["coverage"] == {"cov": 42, "ft": 78, "corpus_units": 21, "new_units_added": 20}
    assert report["crashes"] == 1
    assert report["crash_inputs"][0]["head_hex"] == "5b5b5b5b"
    assert report["log_tail"][-1].startswith("stat::peak_rss_mb")


def test_dictionary_entries_escape_quotes_and_bytes() -> None:
    assert fuzz.dictionary_entry(b'"type"') == '"\\x22type\\x22"'
    assert fuzz.dictionary_entry(b"\xef\xbb\xbf") == '"\\xef\\xbb\\xbf"'
    assert fuzz.dictionary_entry(b"NaN") == '"NaN"'
