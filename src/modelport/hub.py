"""Models from the Hugging Face Hub, pulled into huggingface_hub's own cache (`HF_HOME`, `HF_TOKEN`,
`HF_HUB_OFFLINE` and `HF_ENDPOINT` apply; interrupted downloads resume).

A reference is `hf://OWNER/REPO[@REVISION][/FILE][:QUANT]`, or the same without `hf://` on `modelport pull`.
A GGUF repository gives one quantisation (Q4_K_M unless the reference names one, else the smallest of 4 bits
or more; all parts of a split file); any other repository is pulled whole, as a folder.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PREFIX = "hf://"
PREFERRED = "Q4_K_M"
_QUANT = re.compile(r"(?i)(?<![A-Z0-9])(I?Q[1-8](?:_[A-Z0-9]+)*|BF16|F16|F32)(?![A-Z0-9])")
_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")


class HubError(ValueError):
    """A reference that cannot be pulled: no such repository or file, or the Hub unreachable and nothing
    cached."""


@dataclass(frozen=True)
class Reference:
    """What a reference names: a repository, maybe a revision, a file in it, or a quantisation."""

    repo: str
    revision: str | None = None
    filename: str | None = None
    quant: str | None = None


def is_reference(value: Any) -> bool:
    """Whether an option's value is an `hf://` reference."""
    return isinstance(value, str) and value.startswith(PREFIX)


def parse(reference: str) -> Reference:
    """`[hf://]OWNER/REPO[@REVISION][/FILE][:QUANT]`; a `HubError` naming the reference if malformed."""
    from huggingface_hub import parse_hf_uri
    from huggingface_hub.errors import HfUriError

    body = reference.removeprefix(PREFIX)
    quant = None
    if re.search(r":[A-Za-z0-9_]+$", body):
        body, _, quant = body.rpartition(":")
    try:
        uri = parse_hf_uri(PREFIX + body)
    except HfUriError as error:
        raise HubError(
            f"`{reference}` is not a Hugging Face reference (OWNER/REPO[:QUANT]): {error}"
        ) from None
    return Reference(uri.id, uri.revision, uri.path_in_repo or None, quant)


def local_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options with each `hf://` reference replaced by the local path it is pulled to."""
    return {k: str(pull(v)) if is_reference(v) else v for k, v in options.items()}


def pull(reference: str | Reference) -> Path:
    """The local path of what a reference names, downloading it (with a progress bar) unless cached."""
    from huggingface_hub import hf_hub_download, snapshot_download

    ref = parse(reference) if isinstance(reference, str) else reference
    with _explained(ref):
        if ref.filename is not None:
            return Path(hf_hub_download(ref.repo, ref.filename, revision=ref.revision))
        files = _listing(ref)
        ggufs = {f: size for f, size in files.items() if f.endswith(".gguf")}
        if not ggufs:
            return Path(snapshot_download(ref.repo, revision=ref.revision))
        parts = choose(ggufs, ref.quant)
        projector = projector_of(ggufs)
        if projector is not None:  # it lands beside the model, where `projector_beside` finds it
            hf_hub_download(ref.repo, projector, revision=ref.revision)
        paths = [Path(hf_hub_download(ref.repo, part, revision=ref.revision)) for part in parts]
        return paths[0]  # llama.cpp finds a split file's other parts beside the first


def choose(ggufs: dict[str, int], quant: str | None = None) -> list[str]:
    """The file (all parts of a split one) of the quantisation asked, else Q4_K_M, else the smallest of
    4 bits or more; multimodal projectors (`mmproj`) are never the model."""
    groups: dict[str, list[str]] = {}
    for name in sorted(ggufs):
        if "mmproj" not in name.lower():
            groups.setdefault(_SPLIT.sub("", name), []).append(name)
    if not groups:
        raise HubError("the repository has no GGUF model file (only multimodal projectors)")
    quants = {stem: (_quant_of(stem) or "").upper() for stem in groups}
    if quant is not None:
        asked = [stem for stem in groups if quants[stem] == quant.upper()]
        if not asked:
            have = ", ".join(sorted({q for q in quants.values() if q})) or "none named"
            raise HubError(f"no {quant} file in the repository; its quantisations: {have}")
        return groups[asked[0]]
    preferred = [stem for stem in groups if quants[stem] == PREFERRED]
    if preferred:
        return groups[preferred[0]]
    size = {stem: sum(ggufs[p] for p in parts) for stem, parts in groups.items()}
    enough = [stem for stem in groups if _bits(quants[stem]) >= 4] or list(groups)
    return groups[min(enough, key=lambda stem: size[stem])]


def projector_of(ggufs: dict[str, int]) -> str | None:
    """The multimodal projector (`mmproj…`) of a repository's GGUFs, if it has any: the 16-bit one where
    there are several (the precision projectors are published at), else the smallest."""
    found = {name: size for name, size in ggufs.items() if "mmproj" in name.lower()}
    if not found:
        return None
    half = [name for name in found if re.search(r"f16|bf16", name, re.IGNORECASE)]
    return sorted(half)[0] if half else min(found, key=lambda name: found[name])


def projector_beside(model: Path) -> Path | None:
    """The one `mmproj…gguf` in the folder of a model file (as a pull leaves it), if there is one."""
    found = sorted(p for p in model.parent.glob("*.gguf") if "mmproj" in p.name.lower())
    return found[0] if len(found) == 1 else None


def cached() -> list[tuple[str, int, Path]]:
    """What the cache holds: each model repository, its bytes on disk, and its newest snapshot folder."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        info = scan_cache_dir()
    except CacheNotFound:
        return []
    found = []
    for repo in sorted(info.repos, key=lambda r: r.repo_id):
        if repo.repo_type == "model" and repo.revisions:
            newest = max(repo.revisions, key=lambda r: r.last_modified)
            found.append((repo.repo_id, repo.size_on_disk, Path(newest.snapshot_path)))
    return found


def remove(repo: str) -> int:
    """Delete every cached revision of a model repository; the bytes freed (`HubError` if not cached)."""
    from huggingface_hub import scan_cache_dir

    repo = parse(repo).repo
    cache = scan_cache_dir()
    for entry in cache.repos:
        if entry.repo_id == repo and entry.repo_type == "model":
            strategy = cache.delete_revisions(*(r.commit_hash for r in entry.revisions))
            strategy.execute()
            return int(strategy.expected_freed_size)
    raise HubError(f"`{repo}` is not in the cache; `modelport models --local` lists what is")


def _listing(ref: Reference) -> dict[str, int]:
    """File → size, from the Hub; from the cached snapshot when offline or unreachable."""
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError
    from huggingface_hub.hf_api import RepoFile

    try:
        tree = HfApi().list_repo_tree(ref.repo, revision=ref.revision, recursive=True)
        return {f.path: f.size for f in tree if isinstance(f, RepoFile)}
    except HfHubHTTPError:
        raise  # the Hub answered: no such repository, a gated one…
    except Exception as error:  # offline mode, or the Hub unreachable (its HTTP library's own errors)
        try:
            folder = Path(snapshot_download(ref.repo, revision=ref.revision, local_files_only=True))
        except Exception:
            raise HubError(f"cannot reach the Hub ({error}) and `{ref.repo}` is not in the cache") from None
        return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*") if p.is_file()}


@contextmanager
def _explained(ref: Reference) -> Iterator[None]:
    """Turns huggingface_hub's errors into one line that names the reference."""
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    name = ref.repo + (f"@{ref.revision}" if ref.revision else "")
    try:
        yield
    except GatedRepoError:
        raise HubError(f"`{name}` is gated: accept its terms on the Hub and set HF_TOKEN") from None
    except RepositoryNotFoundError:
        raise HubError(f"no model `{name}` on the Hub (or it is private: set HF_TOKEN)") from None
    except RevisionNotFoundError:
        raise HubError(f"`{name}`: no such revision") from None
    except LocalEntryNotFoundError as error:
        raise HubError(f"`{name}` is not in the cache and the Hub cannot be reached: {error}") from None
    except EntryNotFoundError:
        raise HubError(f"`{name}` has no file `{ref.filename}`") from None


def _quant_of(name: str) -> str | None:
    found = _QUANT.findall(Path(name).name.removesuffix(".gguf"))
    return found[-1] if found else None


def _bits(quant: str) -> int:
    digits = re.search(r"\d+", quant)
    return int(digits[0]) if digits else 0
