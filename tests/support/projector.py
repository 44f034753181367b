"""A tiny vision projector for SmolLM2-135M, written here: a CLIP-style encoder (one block, 32 wide) and
LLaVA-1.5's two-layer MLP projector into the language model's 576-wide embeddings, with small random
weights; a 64x64 image becomes 16 tokens. No vision GGUF or projector ships on PyPI, and this exercises
llama.cpp's multimodal path (mtmd) whole: it proves the plumbing and the safety around it, not vision.
(SmolVLM's own idefics3 projector needs image tokens that SmolLM2's vocabulary lacks: llama.cpp refuses
it with "Invalid token".)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGUFWriter
from gguf.constants import Keys

TEXT_WIDTH = 576  # SmolLM2-135M's embedding width
IMAGE_SIZE = 64  # the encoder's square input: llama.cpp scales every image to it
PATCH = 16
WIDTH = 32


def tiny_projector(path: Path, seed: int = 0) -> Path:
    """Write the projector GGUF to `path`."""
    rng = np.random.default_rng(seed)

    def weights(*shape: int) -> np.ndarray:
        values: np.ndarray = (rng.standard_normal(shape) * 0.02).astype(np.float32)
        return values

    def ones(width: int) -> np.ndarray:
        return np.ones(width, np.float32)

    def zeros(width: int) -> np.ndarray:
        return np.zeros(width, np.float32)

    writer = GGUFWriter(str(path), "clip")
    writer.add_bool(Keys.Clip.HAS_VISION_ENCODER, True)
    writer.add_string(Keys.Clip.PROJECTOR_TYPE, "mlp")
    vision = Keys.ClipVision
    for key, value in (
        (vision.IMAGE_SIZE, IMAGE_SIZE),
        (vision.PATCH_SIZE, PATCH),
        (vision.EMBEDDING_LENGTH, WIDTH),
        (vision.FEED_FORWARD_LENGTH, WIDTH * 2),
        (vision.PROJECTION_DIM, TEXT_WIDTH),
        (vision.BLOCK_COUNT, 1),
        (vision.Attention.HEAD_COUNT, 2),
    ):
        writer.add_uint32(key, value)
    writer.add_float32(vision.Attention.LAYERNORM_EPS, 1e-5)
    writer.add_array(vision.IMAGE_MEAN, [0.5, 0.5, 0.5])
    writer.add_array(vision.IMAGE_STD, [0.5, 0.5, 0.5])
    writer.add_bool(vision.USE_GELU, True)
    patches = (IMAGE_SIZE // PATCH) ** 2
    tensors = {
        "v.class_embd": weights(WIDTH),
        "v.patch_embd.weight": weights(WIDTH, 3, PATCH, PATCH),
        "v.position_embd.weight": weights(patches + 1, WIDTH),
        "v.pre_ln.weight": ones(WIDTH),
        "v.pre_ln.bias": zeros(WIDTH),
        "mm.0.weight": weights(TEXT_WIDTH, WIDTH),
        "mm.0.bias": weights(TEXT_WIDTH),
        "mm.2.weight": weights(TEXT_WIDTH, TEXT_WIDTH),
        "mm.2.bias": weights(TEXT_WIDTH),
    }
    block = "v.blk.0"
    for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
        tensors[f"{block}.{name}.weight"] = weights(WIDTH, WIDTH)
        tensors[f"{block}.{name}.bias"] = weights(WIDTH)
    for name in ("ln1", "ln2"):
        tensors[f"{block}.{name}.weight"] = ones(WIDTH)
        tensors[f"{block}.{name}.bias"] = zeros(WIDTH)
    tensors[f"{block}.ffn_up.weight"] = weights(WIDTH * 2, WIDTH)
    tensors[f"{block}.ffn_up.bias"] = weights(WIDTH * 2)
    tensors[f"{block}.ffn_down.weight"] = weights(WIDTH, WIDTH * 2)
    tensors[f"{block}.ffn_down.bias"] = weights(WIDTH)
    for name, tensor in tensors.items():
        writer.add_tensor(name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
