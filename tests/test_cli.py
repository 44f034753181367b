"""The `modelport` command's help and its `models` listing tell the truth."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "modelport.cli", *args], capture_output=True, text=True, timeout=60
    )


def test_help_lists_the_commands() -> None:
    result = run("--help")
    assert result.returncode == 0
    assert "serve" in result.stdout
    assert "models" in result.stdout
    serve = run("serve", "--help")
    assert "--config" in serve.stdout
    assert "--lazy" in serve.stdout


def test_models_lists_the_defaults_and_aliases() -> None:
    result = run("models")
    assert result.returncode == 0
    assert "smollm2-135m-instruct\tengine llamacpp" in result.stdout
    assert "gpt-4o-mini\t→ smollm2-135m-instruct" in result.stdout
    assert "whisper-1\t→ whisper-tiny-en" in result.stdout


def test_a_bad_config_is_one_clear_line(tmp_path: Path) -> None:
    config = tmp_path / "models.toml"
    config.write_text('[[models]]\nid = "x"\npredictor = "no_such_module:fn"\n')
    result = run("models", "--config", str(config))
    assert result.returncode == 2
    assert "cannot import `no_such_module:fn`" in result.stderr
    assert "Traceback" not in result.stderr
