"""Changes this build makes to the llama.cpp that xllamacpp vendors, each with its reason: exact text
replaced by exact text, so that a source that moved fails the build by name instead of compiling something
nobody read."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from modelport.engines.llamacpp.cpu_builds import (
    AMX_TILE_CONFIG,
    ATTENTION_TILES_UNPACKED,
    DRAFTING_WHILE_FEW,
    MASKED_CELLS_PASSED,
    NGRAM_MAP_RESYNC,
    NGRAM_MAP_WITH_PROMPT,
    NGRAM_MAP_WITH_SLOT,
    Q4_1_TILES,
)


@dataclass(frozen=True)
class SourceEdit:
    """One change to one file of xllamacpp's source tree: exact texts, each replaced by another."""

    name: str
    path: str  # inside the unpacked `xllamacpp-<version>/`
    replacements: tuple[tuple[str, str], ...]  # (before, after)
    why: str


# `ngram-map-k` drafting aborts the whole process (GGML_ABORT) when a slot's history is shorter than the
# history the slot's n-gram map last drafted from: `bench.soak --clients 16` with it on killed the server
# within 150 s of mixed traffic. Since the history changed in a way the map was not told of, none of its
# entries can be trusted to point inside it (reading them is what the abort guards): the map is emptied,
# as `common_ngram_map_begin` empties it for an empty prompt, and the draft goes on from the whole history.
# A draft is only ever a guess the model verifies, so the worst left is a draft not taken. Upstream
# llama.cpp has since bounded the same reads (ggml-org/llama.cpp#23936).
RESYNC_NGRAM_MAP = SourceEdit(
    name=NGRAM_MAP_RESYNC,
    path="thirdparty/llama.cpp/common/ngram-map.cpp",
    replacements=(
        (
            """    if (map.idx_last_check > cur_len) {
        // Should not happen because of common_ngram_map_begin().
        GGML_ABORT("%s: map.idx_last_check > cur_len: %zu > %zu", __func__, map.idx_last_check, cur_len);
    }
""",
            """    if (map.idx_last_check > cur_len || map.size_last_begin > cur_len) {
        // History cut back without a begin: empty the map and draft from the whole history (modelport).
        LOG_WRN("%s: history shorter than the map's (%zu < %zu, begun at %zu): map emptied\\n", __func__,
                cur_len, map.idx_last_check, map.size_last_begin);
        common_ngram_map_begin(map, {});
    }
""",
        ),
    ),
    why="ngram-map-k drafting aborted the process on a history shorter than its map's",
)

# A draft is compute spent on a guess: while one slot generates, a step is bound by reading the weights, and
# verifying a draft of several tokens costs about what one token does, so a single stream copying text gains
# (a code edit 1.24x llama-server per stream). With more slots generating, the step is already as wide as
# the CPU computes at once and every drafted token widens it, the refused ones for nothing: with speculation
# on, free chat 8 at a time made 0.95x llama-server and RAG quotes 4 at a time 0.90x, where modelport without
# it made 1.06x and 0.97x (docs/benchmarks.md). llama.cpp decides each slot's draft alone and reads no
# speculative setting from a request, so a slot drafts here only while at most `DRAFTING_SLOTS` generate.
DRAFTING_SLOTS = 2
DRAFT_WHILE_FEW_GENERATE = SourceEdit(
    name=DRAFTING_WHILE_FEW,
    path="thirdparty/llama.cpp/tools/server/server-context.cpp",
    replacements=(
        (
            """        // determine which slots are generating and drafting
        iterate(slots, [&](server_slot & slot) {
""",
            f"""        // modelport: drafts only while at most {DRAFTING_SLOTS} slots generate (with more,
        // a step has no compute to spare for guesses)
        int n_generating = 0;
        for (const auto & other : slots) {{
            n_generating += other.state == SLOT_STATE_GENERATING;
        }}

        // determine which slots are generating and drafting
        iterate(slots, [&](server_slot & slot) {{
""",
        ),
        (
            """                const int n_draft_max = slot.get_n_draft_max();
""",
            f"""                const int n_draft_max =
                    n_generating <= {DRAFTING_SLOTS} ? slot.get_n_draft_max() : 0;
""",
        ),
    ),
    why="drafts widened every step of a busy server for nothing",
)

# A slot's `ngram-map-k` map indexes the slot's history as it grows, and when a new prompt begins it keeps
# what it indexed of the part the prompt shares with the old history — told only the new prompt's length, it
# takes that part to be the length of the old prompt. The conversation cache empties a slot after each turn
# (llama.cpp's `erase` action) and puts the next turn in it, whatever that turn's prompt: the map then held
# the old history's keys at positions where the new history has other tokens, and indexed none of the new
# prompt's below them. After an unrelated turn in the same slot, a code copy drafted no token where a fresh
# slot drafted 77 (SmolLM2), and a story 19 where it drafted 89, decoding at 55-64 tok/s against 107-119
# (Gemma 3 270M; docs/benchmarks.md). An erased or restored slot now starts its map empty, as a slot that
# never ran does.
NGRAM_MAP_FOLLOWS_SLOT = SourceEdit(
    name=NGRAM_MAP_WITH_SLOT,
    path="thirdparty/llama.cpp/tools/server/server-context.cpp",
    replacements=(
        (
            """                    // Erase token cache
                    const size_t n_erased = slot->prompt.tokens.size();

                    slot->prompt_clear();
""",
            """                    // Erase token cache
                    const size_t n_erased = slot->prompt.tokens.size();

                    slot->prompt_clear();
                    common_speculative_begin(spec.get(), slot->id, {});  // modelport: the map too
""",
        ),
        (
            """                        slot->prompt.clear();
                        slot->prompt.tokens = std::move(restored);
""",
            """                        slot->prompt.clear();
                        slot->prompt.tokens = std::move(restored);
                        common_speculative_begin(spec.get(), slot->id, {});  // modelport: the map afresh
""",
        ),
    ),
    why="an emptied slot's n-gram map kept the old history's keys and drafted little for the next prompt",
)

# The same stale map where llama.cpp itself puts a prompt in a slot that held another and keeps only their
# common prefix: with the conversation cache off, for a turn with an image (which the cache leaves to
# llama.cpp), or on a server that places requests itself. A copy after an unrelated copy in a one-slot model
# with the cache off drafted 0 tokens where a fresh slot drafted 47 (SmolLM2). When a new prompt drops tokens
# the slot held, its map starts afresh, and indexes the new prompt whole when drafting begins.
NGRAM_MAP_FOLLOWS_PROMPT = SourceEdit(
    name=NGRAM_MAP_WITH_PROMPT,
    path="thirdparty/llama.cpp/tools/server/server-context.cpp",
    replacements=(
        (
            """                        slot.prompt.tokens.keep_first(n_past);
""",
            """                        if ((size_t) n_past < slot.prompt.tokens.size()) {
                            common_speculative_begin(spec.get(), slot.id, {});  // modelport: a new history
                        }
                        slot.prompt.tokens.keep_first(n_past);
""",
        ),
    ),
    why="a slot given a prompt that drops part of its history kept the old history's n-gram map",
)

# ggml's AMX kernels configure each thread's tiles from a struct on the stack, but GCC's `_tile_loadconfig`
# tells the compiler it reads only the struct's first 8 bytes, so GCC 12 at -O3 drops the stores of the tiles'
# rows and columns (its object code zeroes the 64 bytes, sets the palette and loads that). Every tile is then
# unconfigured and the first tile instruction faults: on an Intel Xeon VM that lists AMX and grants the tile
# state, the first matrix product of a prompt died of SIGILL (`tilezero` in `tinygemm_kernel_amx`). A
# compiler barrier that is given the struct's address makes every store land before the load. The same
# fault is reported upstream (ggml-org/llama.cpp#26954, open, which moves the struct to read-only data).
AMX_TILES_CONFIGURED = SourceEdit(
    name=AMX_TILE_CONFIG,
    path="thirdparty/llama.cpp/ggml/src/ggml-cpu/amx/mmq.cpp",
    replacements=(
        (
            """    _tile_loadconfig(&tc);
    done = true;
""",
            """    __asm__ __volatile__("" : : "r"(&tc) : "memory");  // modelport: all of tc stored first
    _tile_loadconfig(&tc);
    done = true;
""",
        ),
    ),
    why="GCC dropped the AMX tile configuration's rows and columns, and the first tile instruction faulted",
)

# With one KV cache shared by every slot (modelport's default: any request may take the whole context), a
# token's attention runs over every cell in use and the mask hides the other sequences' cells. ggml's CPU
# flash attention tells a hidden cell by converting its mask value from FP16 and comparing it: one cell at a
# time as a token is generated (the generated tokens of eight streams alternate cell by cell), and a whole
# 64 × 64 tile converted before a prompt's tile is found hidden. With eight streams that is several times
# the cells a stream owns, for every head of every layer: 8 streams of a ~2,000-token prompt each made 4.9
# tok/s all told, against 7.0 on llama-server with a cache per slot (which caps each request at its share of
# the context). A hidden cell's mask is -inf, 0xFC00 in FP16: the kernel now passes hidden cells four at a
# time by their bits, and a tile whose mask rows are all hidden before converting any — 6.7 tok/s on the
# same load (docs/benchmarks.md, 2026-12-03, third). The same cells are computed, in the same order.
FIRST_OPEN_CELL = """\
// modelport: the first cell at or after `ic` the mask row `mp` does not hide (-inf: 0xFC00
// in FP16), read four cells at a time by their bits; a KV cache shared by several sequences holds the
// others' cells between this one's.
static inline int64_t ggml_fa_first_open_cell(const ggml_fp16_t * mp, int64_t ic, int64_t ic_end) {
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; ic + 4 <= ic_end; ic += 4) {
        uint64_t cells;
        memcpy(&cells, mp + ic, sizeof(cells));
        const uint64_t open = cells ^ 0xFC00FC00FC00FC00ull;
        if (open != 0) {
            return ic + (__builtin_ctzll(open) >> 4);
        }
    }
#endif
    for (; ic < ic_end; ++ic) {
        if (mp[ic] != 0xFC00) {
            return ic;
        }
    }
    return ic_end;
}

// modelport: whether every cell of a tile (`rows` mask rows from `first`, `cells` cells from `ic`) is
// hidden, told from the FP16 bits before any is converted.
static inline bool ggml_fa_tile_hidden(const ggml_tensor * mask, int64_t first, int rows, int64_t iq2,
                                       int64_t iq3, int64_t ic, int cells) {
    for (int tq = 0; tq < rows; tq++) {
        const ggml_fp16_t * row = (const ggml_fp16_t *)((const char *) mask->data + (first + tq)*mask->nb[1] +
            (iq2%mask->ne[2])*mask->nb[2] + (iq3%mask->ne[3])*mask->nb[3]) + ic;
        uint16_t open = 0;
        for (int tk = 0; tk < cells; tk++) {
            open |= (uint16_t) (row[tk] ^ 0xFC00);
        }
        if (open != 0) {
            return false;
        }
    }
    return true;
}

"""
MASKED_CELLS_PASSED_BY_BITS = SourceEdit(
    name=MASKED_CELLS_PASSED,
    path="thirdparty/llama.cpp/ggml/src/ggml-cpu/ops.cpp",
    replacements=(
        (
            """static void ggml_compute_forward_flash_attn_ext_f16_one_chunk(
""",
            FIRST_OPEN_CELL
            + """static void ggml_compute_forward_flash_attn_ext_f16_one_chunk(
""",
        ),
        (
            """        for (int64_t ic = ic_start; ic < ic_end; ++ic) {
            const float mv = mp ? slope*GGML_CPU_FP16_TO_FP32(mp[ic]) : 0.0f;
""",
            """        for (int64_t ic = ic_start; ic < ic_end; ++ic) {
            if (mp) {
                ic = ggml_fa_first_open_cell(mp, ic, ic_end);  // modelport: hidden cells passed by bits
                if (ic == ic_end) {
                    break;
                }
            }
            const float mv = mp ? slope*GGML_CPU_FP16_TO_FP32(mp[ic]) : 0.0f;
""",
        ),
        (
            """            // skip the tile entirely if all the masks are -inf
            if (mask) {
""",
            """            // skip the tile entirely if all the masks are -inf
            if (mask && ggml_fa_tile_hidden(mask, iq1, tile_rows, iq2, iq3, ic, kv_tile)) {
                continue;  // modelport: told from the bits, before any is converted
            }
            if (mask) {
""",
        ),
    ),
    why="flash attention converted the mask of every other sequence's cell, one by one, in a shared KV cache",
)

# ggml multiplies a batch of tokens by Q4_0, Q5_0 or Q8_0 weights with llamafile's tiled kernels, a tile of
# weight rows by token columns at a time, each weight block unpacked once per tile; Q4_1 (SmolLM2's file,
# the default model) had none, so a prompt's every product went through the one-pair dot product, unpacking
# each weight block once per token: a prompt read at 203-216 tok/s (`llama-bench -p 1347`, 2 threads),
# half of a code edit's time. The same tiles for Q4_1 against Q8_1 activations read it at 269-309 tok/s, and
# eight tokens at once (eight streams' step, a draft's verification) at 260-299 against 175-202. Each
# product is computed as ggml_vec_dot_q4_1_q8_1 computes it, in its order, to the bit: the edit changes no
# result, only how fast it comes.
Q4_1_TILED = """\
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
// modelport: Q4_1 weights times Q8_1 activations a tile of rows by columns at a time, as tinyBLAS_Q0_AVX
// does for Q4_0: each weight block is unpacked once for every column of its tile, not once per column.
// Each product is the sum ggml_vec_dot_q4_1_q8_1 makes, in its order (the lanes' fused sums of
// d_w*d_a*(q_w.q_a), then the scalar sum of m_w*s_a added), to the bit.
class tinyBLAS_Q4_1_AVX2 {
  public:
    tinyBLAS_Q4_1_AVX2(int64_t k,
                       const block_q4_1 *A, int64_t lda,
                       const block_q8_1 *B, int64_t ldb,
                       float *C, int64_t ldc,
                       int ith, int nth)
        : A(A), B(B), C(C), k(k), lda(lda), ldb(ldb), ldc(ldc), ith(ith), nth(nth) {
    }

    void matmul(int64_t m, int64_t n) {
        mnpack(0, m, 0, n);
    }

  private:
    void mnpack(int64_t m0, int64_t m, int64_t n0, int64_t n) {
        int64_t mc, nc;
        switch ((MIN(m - m0, 4) << 4) | MIN(n - n0, 2)) {
        case 0x42: mc = 4; nc = 2; gemm<4, 2>(m0, m, n0, n); break;
        case 0x41: mc = 4; nc = 1; gemm<4, 1>(m0, m, n0, n); break;
        case 0x32: mc = 3; nc = 2; gemm<3, 2>(m0, m, n0, n); break;
        case 0x31: mc = 3; nc = 1; gemm<3, 1>(m0, m, n0, n); break;
        case 0x22: mc = 2; nc = 2; gemm<2, 2>(m0, m, n0, n); break;
        case 0x21: mc = 2; nc = 1; gemm<2, 1>(m0, m, n0, n); break;
        case 0x12: mc = 1; nc = 2; gemm<1, 2>(m0, m, n0, n); break;
        case 0x11: mc = 1; nc = 1; gemm<1, 1>(m0, m, n0, n); break;
        default: return;
        }
        const int64_t mp = m0 + (m - m0) / mc * mc;
        const int64_t np = n0 + (n - n0) / nc * nc;
        mnpack(mp, m, n0, np);
        mnpack(m0, m, np, n);
    }

    template <int RM, int RN>
    NOINLINE void gemm(int64_t m0, int64_t m, int64_t n0, int64_t n) {
        const int64_t ytiles = (m - m0) / RM;
        const int64_t xtiles = (n - n0) / RN;
        const int64_t tiles = xtiles * ytiles;
        const int64_t duty = (tiles + nth - 1) / nth;
        const int64_t start = duty * ith;
        const int64_t end = MIN(start + duty, tiles);
        const __m256i nibble = _mm256_set1_epi8(15);
        const __m256i ones = _mm256_set1_epi16(1);
        for (int64_t job = start; job < end; ++job) {
            const int64_t ii = m0 + job / xtiles * RM;
            const int64_t jj = n0 + job % xtiles * RN;
            __m256 acc[RN][RM] = {};
            float summs[RN][RM] = {};
            for (int64_t l = 0; l < k; ++l) {
                __m256i qa[RM];
                float da[RM];
                float ma[RM];
                for (int i = 0; i < RM; ++i) {
                    const block_q4_1 *a = A + lda * (ii + i) + l;
                    const __m128i x = _mm_loadu_si128((const __m128i *)a->qs);
                    qa[i] = _mm256_and_si256(nibble, MM256_SET_M128I(_mm_srli_epi16(x, 4), x));
                    da[i] = GGML_CPU_FP16_TO_FP32(a->d);
                    ma[i] = GGML_CPU_FP16_TO_FP32(a->m);
                }
                for (int j = 0; j < RN; ++j) {
                    const block_q8_1 *b = B + ldb * (jj + j) + l;
                    const __m256i qb = _mm256_loadu_si256((const __m256i *)b->qs);
                    const float db = GGML_CPU_FP16_TO_FP32(b->d);
                    const float sb = GGML_CPU_FP16_TO_FP32(b->s);
                    for (int i = 0; i < RM; ++i) {
                        summs[j][i] += ma[i] * sb;
                        const __m256 dot = _mm256_cvtepi32_ps(
                            _mm256_madd_epi16(ones, _mm256_maddubs_epi16(qa[i], qb)));
                        acc[j][i] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(da[i]), _mm256_set1_ps(db)),
                                                    dot, acc[j][i]);
                    }
                }
            }
            for (int j = 0; j < RN; ++j)
                for (int i = 0; i < RM; ++i)
                    C[ldc * (jj + j) + (ii + i)] = hsum(acc[j][i]) + summs[j][i];
        }
    }

    const block_q4_1 *const A;
    const block_q8_1 *const B;
    float *const C;
    const int64_t k;
    const int64_t lda;
    const int64_t ldb;
    const int64_t ldc;
    const int ith;
    const int nth;
};
#endif // __AVX2__ && __FMA__ && __F16C__
"""
Q4_1_CASE = """\
    case GGML_TYPE_Q4_1: {
        if (Btype != GGML_TYPE_Q8_1)
            return false;
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
        tinyBLAS_Q4_1_AVX2 tb{
            k, (const block_q4_1 *)A, lda,
            (const block_q8_1 *)B, ldb,
            (float *)C, ldc,
            params->ith, params->nth};
        tb.matmul(m, n);
        return true;
#else
        return false;
#endif
    }

"""
Q4_1_TILED_PRODUCTS = SourceEdit(
    name=Q4_1_TILES,
    path="thirdparty/llama.cpp/ggml/src/ggml-cpu/llamafile/sgemm.cpp",
    replacements=(
        (
            """    __m128i iq4nlt;
};
#endif // __AVX__
""",
            """    __m128i iq4nlt;
};
#endif // __AVX__

"""
            + Q4_1_TILED,
        ),
        (
            """    case GGML_TYPE_Q5_0: {
        if (Btype != GGML_TYPE_Q8_0)
""",
            Q4_1_CASE
            + """    case GGML_TYPE_Q5_0: {
        if (Btype != GGML_TYPE_Q8_0)
""",
        ),
    ),
    why="ggml multiplied a batch of tokens by Q4_1 weights one dot product at a time",
)

# A prompt's attention runs through ggml's tiled flash attention: for each tile of 64 queries by 64 cached
# tokens it converted the tile's mask from FP16 one value at a time (a table lookup each) and added it to the
# scores, and converted K's 64 x 64 values the same way into a transposed copy for its matrix product. Below
# a prompt's diagonal every mask value is +0 (the cell is open, nothing added), and adding +0 changes no
# score a softmax sees; such tiles are now told by their bits and neither converted nor added. K is
# converted eight values at a time (F16C) and transposed eight by eight in registers. The values are the
# same: llama-perplexity's logits over two 2,048-token windows are the same bytes as unedited llama.cpp's;
# `llama-bench -p 2048` took 18% less CPU (55-58 against 69-70 s) and read 279-310 against 235-242 tok/s
# (docs/benchmarks.md, 2026-12-03, fourth).
ATTENTION_TILE_HELPERS = """\
// modelport: whether every cell of a tile (`rows` mask rows from `first`, `cells` cells from `ic`) is open
// with nothing added (+0 in FP16): the mask then changes no score and need not be converted or added.
static inline bool ggml_fa_tile_open(const ggml_tensor * mask, int64_t first, int rows, int64_t iq2,
                                     int64_t iq3, int64_t ic, int cells) {
    for (int tq = 0; tq < rows; tq++) {
        const ggml_fp16_t * row = (const ggml_fp16_t *)((const char *) mask->data + (first + tq)*mask->nb[1] +
            (iq2%mask->ne[2])*mask->nb[2] + (iq3%mask->ne[3])*mask->nb[3]) + ic;
        uint16_t set = 0;
        for (int tk = 0; tk < cells; tk++) {
            set |= row[tk];
        }
        if (set != 0) {
            return false;
        }
    }
    return true;
}

// modelport: K's rows `first`.. (`cells` of them, FP16, `stride` bytes apart) converted into `packed`
// transposed (packed[dk*width + tk]), eight cells by eight dimensions at a time where F16C converts them.
static inline void ggml_fa_pack_k_f16(float * packed, int width, const char * first, size_t stride, int cells,
                                      int64_t dims) {
    int tk = 0;
#if defined(__AVX__) && defined(__F16C__)
    for (; tk + 8 <= cells && dims % 8 == 0; tk += 8) {
        for (int64_t dk = 0; dk < dims; dk += 8) {
            __m256 r[8];
            for (int t = 0; t < 8; t++) {
                r[t] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(first + (tk + t)*stride) + dk/8));
            }
            // transpose 8 x 8: row t, column d -> row d, column t
            const __m256 a0 = _mm256_unpacklo_ps(r[0], r[1]), a1 = _mm256_unpackhi_ps(r[0], r[1]);
            const __m256 a2 = _mm256_unpacklo_ps(r[2], r[3]), a3 = _mm256_unpackhi_ps(r[2], r[3]);
            const __m256 a4 = _mm256_unpacklo_ps(r[4], r[5]), a5 = _mm256_unpackhi_ps(r[4], r[5]);
            const __m256 a6 = _mm256_unpacklo_ps(r[6], r[7]), a7 = _mm256_unpackhi_ps(r[6], r[7]);
            const __m256 b0 = _mm256_shuffle_ps(a0, a2, 0x44), b1 = _mm256_shuffle_ps(a0, a2, 0xEE);
            const __m256 b2 = _mm256_shuffle_ps(a1, a3, 0x44), b3 = _mm256_shuffle_ps(a1, a3, 0xEE);
            const __m256 b4 = _mm256_shuffle_ps(a4, a6, 0x44), b5 = _mm256_shuffle_ps(a4, a6, 0xEE);
            const __m256 b6 = _mm256_shuffle_ps(a5, a7, 0x44), b7 = _mm256_shuffle_ps(a5, a7, 0xEE);
            float * out = packed + dk*width + tk;
            _mm256_storeu_ps(out + 0*width, _mm256_permute2f128_ps(b0, b4, 0x20));
            _mm256_storeu_ps(out + 1*width, _mm256_permute2f128_ps(b1, b5, 0x20));
            _mm256_storeu_ps(out + 2*width, _mm256_permute2f128_ps(b2, b6, 0x20));
            _mm256_storeu_ps(out + 3*width, _mm256_permute2f128_ps(b3, b7, 0x20));
            _mm256_storeu_ps(out + 4*width, _mm256_permute2f128_ps(b0, b4, 0x31));
            _mm256_storeu_ps(out + 5*width, _mm256_permute2f128_ps(b1, b5, 0x31));
            _mm256_storeu_ps(out + 6*width, _mm256_permute2f128_ps(b2, b6, 0x31));
            _mm256_storeu_ps(out + 7*width, _mm256_permute2f128_ps(b3, b7, 0x31));
        }
    }
#endif
    for (; tk < cells; tk++) {
        const ggml_fp16_t * k_f16 = (const ggml_fp16_t *)(first + tk*stride);
        for (int64_t dk = 0; dk < dims; dk++) {
            packed[dk*width + tk] = GGML_CPU_FP16_TO_FP32(k_f16[dk]);
        }
    }
}

"""
ATTENTION_TILES = SourceEdit(
    name=ATTENTION_TILES_UNPACKED,
    path="thirdparty/llama.cpp/ggml/src/ggml-cpu/ops.cpp",
    replacements=(
        (
            """static void ggml_compute_forward_flash_attn_ext_f16_one_chunk(
""",
            ATTENTION_TILE_HELPERS
            + """static void ggml_compute_forward_flash_attn_ext_f16_one_chunk(
""",
        ),
        (
            """            if (mask) {
                bool can_skip = true;
""",
            """            // modelport: a tile all +0 adds nothing to the scores
            const bool mask_open = mask && ggml_fa_tile_open(mask, iq1, tile_rows, iq2, iq3, ic, kv_tile);
            if (mask && !mask_open) {
                bool can_skip = true;
""",
        ),
        (
            """            for (int tk = 0; tk < kv_tile; tk++) {
                const char * k_data = (const char *)k->data + (ic + tk)*nbk1 + ik2*nbk2 + ik3*nbk3;
                if (kv_type == GGML_TYPE_F16) {
                    const ggml_fp16_t * k_f16 = (const ggml_fp16_t *)k_data;
                    for (int64_t dk = 0; dk < DK; dk++) {
                        K_f32[dk * KV_TILE_SZ + tk] = GGML_CPU_FP16_TO_FP32(k_f16[dk]);
                    }
                } else {
                    const float * k_f32_src = (const float *)k_data;
                    for (int64_t dk = 0; dk < DK; dk++) {
                        K_f32[dk * KV_TILE_SZ + tk] = k_f32_src[dk];
                    }
                }
            }
""",
            """            if (kv_type == GGML_TYPE_F16) {  // modelport: eight at a time
                ggml_fa_pack_k_f16(K_f32, KV_TILE_SZ, (const char *)k->data + ic*nbk1 + ik2*nbk2 + ik3*nbk3,
                                   nbk1, kv_tile, DK);
            } else {
                for (int tk = 0; tk < kv_tile; tk++) {
                    const float * k_f32_src = (const float *)((const char *)k->data + (ic + tk)*nbk1 +
                        ik2*nbk2 + ik3*nbk3);
                    for (int64_t dk = 0; dk < DK; dk++) {
                        K_f32[dk * KV_TILE_SZ + tk] = k_f32_src[dk];
                    }
                }
            }
""",
        ),
        (
            """            if (mask) {
                ggml_vec_add_f32(tile_rows * KV_TILE_SZ, KQ, KQ, mask32);
""",
            """            if (mask && !mask_open) {
                ggml_vec_add_f32(tile_rows * KV_TILE_SZ, KQ, KQ, mask32);
""",
        ),
    ),
    why="a prompt's flash attention converted and added masks that add nothing, and K, a value at a time",
)

EDITS = (
    RESYNC_NGRAM_MAP,
    DRAFT_WHILE_FEW_GENERATE,
    NGRAM_MAP_FOLLOWS_SLOT,
    NGRAM_MAP_FOLLOWS_PROMPT,
    AMX_TILES_CONFIGURED,
    MASKED_CELLS_PASSED_BY_BITS,
    Q4_1_TILED_PRODUCTS,
    ATTENTION_TILES,
)


def apply(source: Path, edits: tuple[SourceEdit, ...] = EDITS) -> list[str]:
    """Make each edit in the unpacked source at `source` (an edit already made is left as it is) and
    return their names. Raises `RuntimeError` naming the edit and the file when the text it replaces is
    not there exactly once."""
    for edit in edits:
        path = source / edit.path
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        for before, after in edit.replacements:
            if after in text:
                continue
            if text.count(before) != 1:
                raise RuntimeError(
                    f"the source patch {edit.name!r} ({edit.why}) does not fit {edit.path} of this "
                    "xllamacpp: its text to replace is not there once; the patch must be written again for "
                    "this version"
                )
            text = text.replace(before, after)
        path.write_text(text, encoding="utf-8")
    return [edit.name for edit in edits]
