"""Models of other families, made from SmolLM2's own weights: its GGUF re-packed (with the `gguf` package)
under a chat template written from the family's published format, and, where the family's markers are
special tokens of its vocabulary (gpt-oss's harmony), with unused special tokens of SmolLM2's renamed to
them. The weights know none of these formats: what the tests check is what the format, the template and the
grammar decide, never what the model says."""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path

import gguf
from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

from modelport.engines.llamacpp.launch import default_gguf

TEMPLATES = Path(__file__).parent.parent / "service" / "templates"
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two numbers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
}
# `add` of a digit and a digit: a call as long as its grammar lets it be, whatever the weights write (a model
# of SmolLM2's first blocks writes numbers without end).
DIGIT = {"type": "integer", "minimum": 0, "maximum": 9}
DIGITS = {
    "type": "function",
    "function": {
        **ADD["function"],
        "parameters": {"type": "object", "properties": {"a": DIGIT, "b": DIGIT}, "required": ["a", "b"]},
    },
}
# How many of SmolLM2's 30 blocks the tests that check what a template and a grammar decide keep (`repack`'s
# `layers`): its words mean nothing to them, and it reads a prompt seven times as fast.
FIRST_BLOCKS = 4
# SmolLM2's special tokens 3-9 (`<repo_name>` … `<issue_closed>`: code-hosting markers no chat uses), renamed
# to harmony's.
HARMONY_TOKENS = {
    3: "<|start|>",
    4: "<|end|>",
    5: "<|message|>",
    6: "<|channel|>",
    7: "<|constrain|>",
    8: "<|return|>",
    9: "<|call|>",
}


def template(name: str) -> str:
    """A test template's text (`tests/service/templates/NAME.jinja`)."""
    return (TEMPLATES / f"{name}.jinja").read_text()


def repack(
    name: str,
    folder: Path,
    renamed: dict[int, str] | None = None,
    context_length: int | None = None,
    layers: int | None = None,
) -> Path:
    """SmolLM2's GGUF under the template `name` (`smollm2`: its own), with the tokens `renamed` (id: new
    text), a training context of `context_length` tokens (positions past its 8,192 are extrapolated: for
    prompts as long as an agent's, whose words do not matter) and only its first `layers` blocks of 30 (its
    embeddings, those blocks and its output: `FIRST_BLOCKS`), written into `folder` as `NAME.gguf`
    (`NAME-LAYERS.gguf` when cut)."""
    out = folder / (f"{name}-{layers}.gguf" if layers else f"{name}.gguf")
    reader = copy.copy(_smollm2())  # its own list of tensors to cut, the fields shared
    architecture = reader.get_field(gguf.Keys.General.ARCHITECTURE).contents()
    writer = gguf.GGUFWriter(out, arch=architecture, endianess=reader.endianess)
    metadata = {
        gguf.Keys.General.NAME: MetadataDetails(gguf.GGUFValueType.STRING, f"SmolLM2 as {name}"),
    }
    if name != "smollm2":
        chat_template = MetadataDetails(gguf.GGUFValueType.STRING, template(name))
        metadata[gguf.Keys.Tokenizer.CHAT_TEMPLATE] = chat_template
    if context_length is not None:
        key = gguf.Keys.LLM.CONTEXT_LENGTH.format(arch=architecture)
        metadata[key] = MetadataDetails(gguf.GGUFValueType.UINT32, context_length)
    if layers is not None:
        key = gguf.Keys.LLM.BLOCK_COUNT.format(arch=architecture)
        metadata[key] = MetadataDetails(gguf.GGUFValueType.UINT32, layers)
        reader.tensors = [t for t in reader.tensors if _block(t.name) < layers]
    if renamed:
        tokens = list(reader.get_field(gguf.Keys.Tokenizer.LIST).contents())
        for token, text in renamed.items():
            tokens[token] = text
        metadata[gguf.Keys.Tokenizer.LIST] = MetadataDetails(
            gguf.GGUFValueType.ARRAY, tokens, sub_type=gguf.GGUFValueType.STRING
        )
    copy_with_new_metadata(reader, writer, metadata, [])
    return out


@functools.cache
def _smollm2() -> gguf.GGUFReader:
    """SmolLM2's GGUF as read, once a process: reading its metadata (49,152 tokens and 48,900 merges, each
    a numpy view) is 5 s of a repack's 5.3, and a worker repacks it for several families and modules (kept:
    160 MiB)."""
    return gguf.GGUFReader(default_gguf())


def _block(tensor: str) -> int:
    """The block a tensor belongs to (`blk.N.…`); -1 for the embeddings and the output's."""
    found = re.match(r"blk\.(\d+)\.", tensor)
    return int(found.group(1)) if found else -1
