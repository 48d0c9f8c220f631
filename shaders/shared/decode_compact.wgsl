// The version-2 (compact) decode body shared by every output layout (entry point
// `main_compact` in decode.wgsl; CPU twin: `gpu::cpu_twin::decode_compact_patches`).
// One workgroup per patch stream (all its channels), whatever the patch size:
// 1. invocation 0 parses the patch header into workgroup memory, with exactly the checks of
//    the CPU decoder's `parse_patch_header`: transform (and the palette, whose patches code
//    one plane of indices instead of the channels), per channel predictor and canonical
//    Huffman decode table, every segment's start bit; then the whole workgroup fills each
//    channel's first-level lookup table (codes up to FAST_BITS long) from the canonical one;
// 2. phases k = 0 .. ceil(ph / S) - 1 (S segments per channel): invocation c * S + s decodes
//    row k * S + s, the next row of segment s of channel c, into residuals in workgroup
//    memory; its bit position carries over to its next phase;
// 3. then the phase's S rows in order, the invocations as columns (two adjacent columns each
//    for 128-pixel patches): the prediction's part from the row above (the previous row of
//    every channel is kept in workgroup memory), a workgroup prefix sum along the row for
//    left-type predictors, the colour transform undone (or the index looked up in the
//    palette), each sample to `row_sample(img, ch, y, x, v)`, then, after the row's barrier,
//    `end_row` (both defined by the output layout: the interleaved one assembles the row's
//    words in workgroup memory and stores them whole).
// A flagged patch's output is unspecified. Every loop is bounded by the patch size, the
// alphabet or the segment count, and every barrier is reached by the whole workgroup: the
// bounds come from the image table and the workgroup id, or are broadcast with
// workgroupUniformLoad.
//
// Workgroup memory: 8 KiB residuals (a palette patch keeps its palette in the second
// quarter), 2 KiB previous rows, 2 KiB prefix sum, 0.8 KiB tables, 2 KiB lookup tables, and
// the interleaved layout's 1 KiB row of output words (about 15.9 KiB, under wgpu's default
// 16 KiB; the version-1 entry points do not reserve it).
//
// decode.wgsl declares `input_words`, `sizes`, `offsets`, `images`, `errors` and `params`; the
// format constants come from the generated prelude.

// Decode-table entries per channel: one per code length 0 ..= MAX_CODE_LEN (0 unused).
const CODE_SLOTS: u32 = MAX_CODE_LEN + 1u;
// Segment-start entries per channel: each segment's start and the end of the last.
const SEGMENT_SLOTS: u32 = SEGMENTS_MAX + 1u;
// Columns per invocation, at most (128-pixel patches).
const COLUMNS_MAX: u32 = MAX_PATCH / WG;
// Entries per channel of the first-level lookup table (FAST_BITS, the stream bits indexing
// it, comes from the prelude).
const FAST_SIZE: u32 = 1u << FAST_BITS;

// `cp_channels` bits: the predictor, then flags and the token of a one-token code.
const CP_PREDICTOR_MASK: u32 = 7u;
// The code has one token, zero bits long (the token in bits 8..16).
const CP_SINGLE: u32 = 8u;

// `cp_status` bits.
const CP_HEADER_OK: u32 = 1u;
// Some channel has a left-type predictor: rows need the prefix sum.
const CP_ANY_LEFT: u32 = 2u;

// Residuals of one phase: channel c, segment s, column x is half x % 2 of word
// (c * SEGMENT_ROW_SAMPLES_MAX + s * patch_size + x) / 2 (a position's two samples share a
// word, so the decoding invocation writes it whole).
var<workgroup> cp_residuals: array<u32, MAX_CHANNELS * SEGMENT_ROW_SAMPLES_MAX / 2u>;
// The previous row of every channel, as coded (before the colour transform is undone):
// channel c, column x at c * MAX_PATCH + x.
var<workgroup> cp_previous: array<u32, MAX_CHANNELS * MAX_PATCH>;
// Double buffer of the prefix sum along a row: per invocation, its columns' total of every
// channel.
var<workgroup> cp_scan: array<vec4<u32>, 2u * WG>;
// Canonical code of channel c, length l at c * CODE_SLOTS + l: the first code of that length
// (bits 0..12), how many codes have it (bits 12..20), where their tokens start in
// `cp_tokens` (bits 20..).
var<workgroup> cp_codes: array<u32, MAX_CHANNELS * CODE_SLOTS>;
// Tokens of channel c's code sorted by (length, token), four to a word (a token is below
// 64): entry i is byte i % 4 of word c * CP_TOKEN_WORDS + i / 4 (`cp_token`).
const CP_TOKEN_WORDS: u32 = (MAX_TOKENS + 3u) / 4u;
var<workgroup> cp_tokens: array<u32, MAX_CHANNELS * CP_TOKEN_WORDS>;
// First-level lookup table of channel c: the entry for the next FAST_BITS stream bits j (as
// read, LSB first) is half j % 2 of word (c * FAST_SIZE + j) / 2: the code length (bits
// 0..4; 0 for a code longer than FAST_BITS, left to the canonical compares) and the token
// (bits 4..16).
var<workgroup> cp_fast: array<u32, MAX_CHANNELS * FAST_SIZE / 2u>;
// Per channel: predictor, CP_SINGLE and its token.
var<workgroup> cp_channels: array<u32, MAX_CHANNELS>;
// Start bit of segment s of channel c at c * SEGMENT_SLOTS + s, then the channel's end.
var<workgroup> cp_segment_start: array<u32, MAX_CHANNELS * SEGMENT_SLOTS>;
// The patch's colour transform.
var<workgroup> cp_transform: u32;
// Entries of the patch's palette (0: none). The entries live in `cp_residuals` from word
// CP_PALETTE_BASE (entry i, channel c in half c % 2 of word CP_PALETTE_BASE + 2i + c / 2):
// a palette patch codes one plane, whose residuals use the words below it.
var<workgroup> cp_palette_count: u32;
const CP_PALETTE_BASE: u32 = SEGMENT_ROW_SAMPLES_MAX / 2u;
// CP_HEADER_OK (and CP_ANY_LEFT) once invocation 0 has checked the header; 0 if it failed.
var<workgroup> cp_status: u32;

// Segments per channel of a patch `ph` rows high (format::compact::segments).
fn cp_segments(patch_size: u32, ph: u32) -> u32 {
    return min(ph, min(SEGMENTS_MAX, SEGMENT_ROW_SAMPLES_MAX / patch_size));
}

// Single-sample tokens at a depth (format::compact::token_count).
fn cp_token_count(depth: u32) -> u32 {
    return TOKEN_DIRECT + (1u << TOKEN_MANTISSA_BITS) * (depth - TOKEN_DIRECT_LOG2);
}

// The first run token (the end-of-row token), after the `singles` single tokens and the pair
// tokens (format::compact::run_token_first).
fn cp_run_first(singles: u32) -> u32 {
    return singles + PAIR_LIMIT * PAIR_LIMIT;
}

// Zigzag value to residual, mod 2^32 (format::compact::unzigzag).
fn cp_unzigzag(z: u32) -> u32 {
    return (z >> 1u) ^ (0u - (z & 1u));
}

// Reads `n` (<= 16) header bits at *pos of the stream of `stream_bits` bits at byte `start`
// and advances *pos. Bits past the stream's end read as 0, as the CPU decoder's reader sees
// them: the header checks then agree with it whatever bytes follow the stream.
fn cp_take(start: u32, stream_bits: u32, pos: ptr<function, u32>, n: u32) -> u32 {
    let p = *pos;
    *pos = p + n;
    if (p >= stream_bits) {
        return 0u;
    }
    let v = read_bits(start, p, n);
    if (p + n <= stream_bits) {
        return v;
    }
    return v & ((1u << (stream_bits - p)) - 1u);
}

// Parses and checks the header of the patch stream of `size` bytes at byte `start`, with the
// checks of the CPU decoder's `parse_patch_header` (a header is flagged exactly when that
// returns an error), into the workgroup tables. Returns the error flags (0: valid).
fn cp_parse_header(start: u32, size: u32, channels: u32, depth: u32, segs: u32) -> u32 {
    let stream_bits = size * 8u;
    var pos = 0u;
    let transform = cp_take(start, stream_bits, &pos, TRANSFORM_BITS);
    if (transform > TRANSFORM_MAX_ID
        || (transform == TRANSFORM_SUBTRACT_GREEN && channels < 3u)) {
        return ERR_TRANSFORM;
    }
    cp_transform = transform;
    // The palette's entries, and one coded plane (the indices) instead of the channels.
    var coded = channels;
    cp_palette_count = 0u;
    if (transform == TRANSFORM_PALETTE) {
        let count = cp_take(start, stream_bits, &pos, PALETTE_COUNT_BITS) + 1u;
        for (var i = 0u; i < count; i = i + 1u) {
            var words = vec2<u32>(0u);
            for (var c = 0u; c < channels; c = c + 1u) {
                words[c / 2u] = words[c / 2u] | (cp_take(start, stream_bits, &pos, depth) << (16u * (c % 2u)));
            }
            cp_residuals[CP_PALETTE_BASE + 2u * i] = words.x;
            cp_residuals[CP_PALETTE_BASE + 2u * i + 1u] = words.y;
        }
        if (pos > stream_bits) {
            return ERR_PALETTE;
        }
        cp_palette_count = count;
        coded = 1u;
    }
    let singles = cp_token_count(depth);
    let ntok_max = cp_run_first(singles) + RUN_TOKENS;
    var any_left = false;
    for (var c = 0u; c < coded; c = c + 1u) {
        let predictor = cp_take(start, stream_bits, &pos, COMPACT_PREDICTOR_BITS);
        if (predictor > COMPACT_PREDICTOR_MAX_ID) {
            return ERR_PREDICTOR;
        }
        any_left = any_left || predictor == PREDICTOR_GRADIENT || predictor == PREDICTOR_LEFT
            || predictor == PREDICTOR_HALF_GRADIENT;
        let ntok = cp_take(start, stream_bits, &pos, TOKEN_COUNT_BITS);
        if (ntok == 0u || ntok > ntok_max) {
            return ERR_CODE;
        }
        // Code lengths, each "0" (same as previous), "100" (+1), "101" (-1, wrapping below 0
        // to a length over MAX_CODE_LEN as in the CPU decoder) or "11" and 4 bits.
        var lengths: array<u32, MAX_TOKENS>;
        var count: array<u32, CODE_SLOTS>;
        var too_long = false;
        var previous = 0u;
        for (var t = 0u; t < ntok; t = t + 1u) {
            if (cp_take(start, stream_bits, &pos, 1u) == 1u) {
                if (cp_take(start, stream_bits, &pos, 1u) == 1u) {
                    previous = cp_take(start, stream_bits, &pos, CODE_LENGTH_BITS);
                } else if (cp_take(start, stream_bits, &pos, 1u) == 0u) {
                    previous = previous + 1u;
                } else {
                    previous = (previous - 1u) & 0xffu;
                }
            }
            let l = min(previous, 0xffu);
            lengths[t] = l;
            if (l > MAX_CODE_LEN) {
                too_long = true;
            } else {
                count[l] = count[l] + 1u;
            }
        }
        // huffman::check_lengths: a complete code, or one token of length 1.
        var used = 0u;
        var kraft = 0u;
        for (var l = 1u; l <= MAX_CODE_LEN; l = l + 1u) {
            used = used + count[l];
            kraft = kraft + (count[l] << (MAX_CODE_LEN - l));
        }
        if (too_long || used == 0u || (used == 1u && count[1] != 1u)
            || (used > 1u && kraft != (1u << MAX_CODE_LEN))) {
            return ERR_CODE;
        }
        var info = predictor;
        if (used == 1u) {
            for (var t = 0u; t < ntok; t = t + 1u) {
                if (lengths[t] != 0u) {
                    info = info | CP_SINGLE | (t << 8u);
                }
            }
        } else {
            // Canonical codes as in deflate (huffman::codes): by length, then by token.
            var next: array<u32, CODE_SLOTS>;
            var code = 0u;
            var offset = 0u;
            for (var l = 1u; l <= MAX_CODE_LEN; l = l + 1u) {
                code = (code + select(count[l - 1u], 0u, l == 1u)) << 1u;
                cp_codes[c * CODE_SLOTS + l] = code | (count[l] << 12u) | (offset << 20u);
                next[l] = offset;
                offset = offset + count[l];
            }
            for (var t = 0u; t < ntok; t = t + 1u) {
                let l = lengths[t];
                if (l != 0u) {
                    let i = next[l];
                    let word = c * CP_TOKEN_WORDS + i / 4u;
                    let shift = 8u * (i % 4u);
                    cp_tokens[word] = (cp_tokens[word] & ~(0xffu << shift)) | (t << shift);
                    next[l] = next[l] + 1u;
                }
            }
        }
        cp_channels[c] = info;
        let width = cp_take(start, stream_bits, &pos, SEGMENT_WIDTH_BITS);
        if (width > SEGMENT_WIDTH_MAX) {
            return ERR_SEGMENT_TABLE;
        }
        let base = cp_take(start, stream_bits, &pos, SEGMENT_BASE_BITS);
        // Segment lengths for now; turned into start bits below.
        for (var s = 0u; s < segs; s = s + 1u) {
            cp_segment_start[c * SEGMENT_SLOTS + s] = base + cp_take(start, stream_bits, &pos, width);
        }
        if (pos > stream_bits) {
            return ERR_OVERRUN;
        }
    }
    var at = pos;
    for (var c = 0u; c < coded; c = c + 1u) {
        for (var s = 0u; s < segs; s = s + 1u) {
            let length = cp_segment_start[c * SEGMENT_SLOTS + s];
            cp_segment_start[c * SEGMENT_SLOTS + s] = at;
            at = at + length;
        }
        cp_segment_start[c * SEGMENT_SLOTS + segs] = at;
    }
    if (at > stream_bits) {
        return ERR_OVERRUN;
    }
    // The segments end in the stream's last byte, and its padding bits are zero.
    if ((at + 7u) / 8u != size
        || ((at & 7u) != 0u && read_bits(start, at, 8u - (at & 7u)) != 0u)) {
        return ERR_TRAILING;
    }
    cp_status = CP_HEADER_OK | select(0u, CP_ANY_LEFT, any_left);
    return 0u;
}

// Entry i of channel c's sorted tokens.
fn cp_token(c: u32, i: u32) -> u32 {
    return (cp_tokens[c * CP_TOKEN_WORDS + i / 4u] >> (8u * (i % 4u))) & 0xffu;
}

// The lookup-table entry of channel c for the next FAST_BITS stream bits j: the canonical
// compares of cp_read_symbol for lengths 1 ..= FAST_BITS (they depend only on those bits).
fn cp_fast_entry(c: u32, j: u32) -> u32 {
    let bits = reverseBits(j) >> (32u - FAST_BITS);
    for (var l = 1u; l <= FAST_BITS; l = l + 1u) {
        let e = cp_codes[c * CODE_SLOTS + l];
        let index = (bits >> (FAST_BITS - l)) - (e & 0xfffu);
        if (index < ((e >> 12u) & 0xffu)) {
            return l | (cp_token(c, (e >> 20u) + index) << 4u);
        }
    }
    return 0u;
}

// Fills the lookup tables of the channels with a multi-token code, invocation `lid` taking
// words lid, lid + WG, ... (both halves of each). The caller then needs a barrier.
fn cp_fill_fast(lid: u32, channels: u32) {
    for (var c = 0u; c < channels; c = c + 1u) {
        if ((cp_channels[c] & CP_SINGLE) == 0u) {
            for (var w = lid; w < FAST_SIZE / 2u; w = w + WG) {
                cp_fast[c * FAST_SIZE / 2u + w] =
                    cp_fast_entry(c, 2u * w) | (cp_fast_entry(c, 2u * w + 1u) << 16u);
            }
        }
    }
}

struct CpSymbol {
    token: u32,
    // Bits of the code and its raw bits.
    bits: u32,
    // The zigzag value of a single-sample token; the length in positions of a run token
    // (0 for the end-of-row token).
    value: u32,
}

// The symbol at bit `p` of the stream at byte `start`, in channel c's code. A symbol whose
// code or raw bits run past its segment's end may read anything there; the caller then flags
// the overrun, which depends only on the bits inside the segment (a prefix code's length is
// fixed by the bits before the end if a code ends there, and exceeds the end otherwise).
fn cp_read_symbol(start: u32, p: u32, c: u32, singles: u32) -> CpSymbol {
    let window = read_bits32(start, p);
    let info = cp_channels[c];
    var token = (info >> 8u) & 0xffu;
    var len = 0u;
    if ((info & CP_SINGLE) == 0u) {
        // A code of at most FAST_BITS bits from the lookup table.
        let j = window & (FAST_SIZE - 1u);
        let fast = (cp_fast[(c * FAST_SIZE + j) / 2u] >> (16u * (j % 2u))) & 0xffffu;
        token = fast >> 4u;
        len = fast & 0xfu;
        if (len == 0u) {
            // Longer: codes are written most significant bit first, so reversed, the next
            // MAX_CODE_LEN stream bits are a number whose top l bits are the candidate code
            // of length l.
            let bits = reverseBits(window) >> (32u - MAX_CODE_LEN);
            for (var l = FAST_BITS + 1u; l <= MAX_CODE_LEN; l = l + 1u) {
                let e = cp_codes[c * CODE_SLOTS + l];
                let index = (bits >> (MAX_CODE_LEN - l)) - (e & 0xfffu);
                if (index < ((e >> 12u) & 0xffu)) {
                    token = cp_token(c, (e >> 20u) + index);
                    len = l;
                    break;
                }
            }
        }
    }
    let run_first = cp_run_first(singles);
    if (token >= run_first) {
        // format::compact::run_base: 2^j + j raw bits positions, j = 0 the end of the row.
        let j = token - run_first;
        if (j == 0u) {
            return CpSymbol(token, len, 0u);
        }
        return CpSymbol(token, len + j, (1u << j) + ((window >> len) & ((1u << j) - 1u)));
    }
    if (token >= singles) {
        return CpSymbol(token, len, 0u);
    }
    if (token < TOKEN_DIRECT) {
        return CpSymbol(token, len, token);
    }
    // format::compact::token_base: the exponent and the bits below the leading one; the
    // lower bits follow raw.
    let n = TOKEN_DIRECT_LOG2 + ((token - TOKEN_DIRECT) >> TOKEN_MANTISSA_BITS);
    let m = (token - TOKEN_DIRECT) & ((1u << TOKEN_MANTISSA_BITS) - 1u);
    let nraw = n - TOKEN_MANTISSA_BITS;
    let raw = (window >> len) & ((1u << nraw) - 1u);
    return CpSymbol(token, len + nraw, ((1u << n) | (m << nraw)) + raw);
}

// Decodes one row (ceil(pw / 2) positions) of channel c's segment from bit *pos (advanced)
// to `end`, into the residuals at column `slot_base` of the channel. Returns the error flags:
// ERR_SEGMENT for a symbol that ends past `end`, ERR_SYMBOL for a pair token where a single
// one must stand or a run token past the row's end or in a position's second symbol.
fn cp_decode_row(
    start: u32,
    pos: ptr<function, u32>,
    end: u32,
    c: u32,
    slot_base: u32,
    pw: u32,
    singles: u32,
) -> u32 {
    let word0 = (c * SEGMENT_ROW_SAMPLES_MAX + slot_base) / 2u;
    let positions = (pw + 1u) / 2u;
    let run_first = cp_run_first(singles);
    var p = *pos;
    var flags = 0u;
    var i = 0u;
    // Each pass takes one position or a run of at least one: at most `positions` passes.
    loop {
        if (i >= positions) {
            break;
        }
        // The last position of an odd row holds one sample.
        let one_sample = 2u * i + 1u == pw;
        let a = cp_read_symbol(start, p, c, singles);
        p = p + a.bits;
        if (p > end) {
            flags = ERR_SEGMENT;
            break;
        }
        if (a.token >= run_first) {
            // Zero positions: the rest of the row, or a run that must fit in it.
            let n = select(a.value, positions - i, a.value == 0u);
            if (n > positions - i) {
                flags = ERR_SYMBOL;
                break;
            }
            for (var k = 0u; k < n; k = k + 1u) {
                cp_residuals[word0 + i + k] = 0u;
            }
            i = i + n;
            continue;
        }
        var z0 = a.value;
        var z1 = 0u;
        if (a.token >= singles) {
            if (one_sample) {
                flags = ERR_SYMBOL;
                break;
            }
            let q = a.token - singles;
            z0 = q / PAIR_LIMIT;
            z1 = q % PAIR_LIMIT;
        } else if (!one_sample) {
            let b = cp_read_symbol(start, p, c, singles);
            p = p + b.bits;
            if (p > end) {
                flags = ERR_SEGMENT;
                break;
            }
            if (b.token >= singles) {
                flags = ERR_SYMBOL;
                break;
            }
            z1 = b.value;
        }
        cp_residuals[word0 + i] = (cp_unzigzag(z0) & 0xffffu) | (cp_unzigzag(z1) << 16u);
        i = i + 1u;
    }
    *pos = p;
    return flags;
}

// The part of channel c's prediction at column x that depends on the row above
// (format::compact::prediction_from_above): all of it for up-type predictors; for left-type
// ones g (b in column 0), to which the prefix sum adds the sample on the left. Mod 2^32;
// the caller reduces to the depth.
fn cp_from_above(predictor: u32, c: u32, x: u32, pw: u32) -> u32 {
    let row = c * MAX_PATCH;
    let b = cp_previous[row + x];
    // a = b in column 0.
    let a = cp_previous[row + max(x, 1u) - 1u];
    switch predictor {
        case PREDICTOR_UP: {
            return b;
        }
        case PREDICTOR_GRADIENT: {
            return select(b - a, b, x == 0u);
        }
        case PREDICTOR_LEFT: {
            return select(0u, b, x == 0u);
        }
        case PREDICTOR_HALF_GRADIENT: {
            return select(bitcast<u32>((i32(b) - i32(a)) >> 1u), b, x == 0u);
        }
        case PREDICTOR_UP_MEAN: {
            let right = cp_previous[row + min(x + 1u, pw - 1u)];
            return (a + right) >> 1u;
        }
        default: {
            return 0u;
        }
    }
}

// Reconstructs row `slot` of the phase (image row `y`) of the `coded` planes: invocation
// `lid` takes columns lid * cols .. lid * cols + cols - 1. With `scan` (uniform: some plane
// is left-type) the row's inclusive prefix sum of residual + g is computed for every plane
// (used for the left-type ones). Updates the previous rows and writes the `channels`
// samples: the planes with the colour transform undone, or with a palette of `palette`
// entries (the one plane its indices; an index past it flags ERR_PALETTE). Contains
// barriers: call in uniform control flow.
fn cp_output_row(
    img: ImageInfo,
    lid: u32,
    slot: u32,
    ps: u32,
    pw: u32,
    x0: u32,
    y: u32,
    coded: u32,
    channels: u32,
    palette: u32,
    scan: bool,
) {
    let cols = max(ps / WG, 1u);
    let mask = (1u << img.depth) - 1u;
    var left = vec4<bool>(false);
    for (var c = 0u; c < coded; c = c + 1u) {
        let predictor = cp_channels[c] & CP_PREDICTOR_MASK;
        left[c] = predictor == PREDICTOR_GRADIENT || predictor == PREDICTOR_LEFT
            || predictor == PREDICTOR_HALF_GRADIENT;
    }
    // residual + g per own column and channel (0 past the patch's width).
    var t: array<vec4<u32>, COLUMNS_MAX>;
    for (var j = 0u; j < cols; j = j + 1u) {
        let x = lid * cols + j;
        if (x < pw) {
            for (var c = 0u; c < coded; c = c + 1u) {
                let i = c * SEGMENT_ROW_SAMPLES_MAX + slot * ps + x;
                let r = (cp_residuals[i / 2u] >> (16u * (i % 2u))) & 0xffffu;
                let predictor = cp_channels[c] & CP_PREDICTOR_MASK;
                t[j][c] = r + cp_from_above(predictor, c, x, pw);
            }
        }
    }
    var v = t;
    if (scan) {
        // Inclusive prefix sum along the row: the own columns, then a Hillis-Steele scan of
        // the invocations' totals (double-buffered in cp_scan).
        let total = t[0] + t[1];
        cp_scan[lid] = total;
        workgroupBarrier();
        var src = 0u;
        for (var off = 1u; off < WG; off = off * 2u) {
            var sum = cp_scan[src + lid];
            if (lid >= off) {
                sum = sum + cp_scan[src + lid - off];
            }
            cp_scan[WG - src + lid] = sum;
            workgroupBarrier();
            src = WG - src;
        }
        let prefix0 = cp_scan[src + lid] - total + t[0];
        v[0] = select(t[0], prefix0, left);
        v[1] = select(t[1], prefix0 + t[1], left);
    } else {
        // Every invocation has read the previous row before it is overwritten.
        workgroupBarrier();
    }
    let transform = cp_transform;
    for (var j = 0u; j < cols; j = j + 1u) {
        let x = lid * cols + j;
        if (x < pw) {
            let s = v[j] & vec4<u32>(mask);
            for (var c = 0u; c < coded; c = c + 1u) {
                cp_previous[c * MAX_PATCH + x] = s[c];
            }
            var out = s;
            if (transform == TRANSFORM_SUBTRACT_GREEN) {
                out.x = (s.x + s.y) & mask;
                out.z = (s.z + s.y) & mask;
            }
            if (palette > 0u) {
                // The entry, or entry 0 past the palette (the patch is flagged).
                let index = select(0u, s.x, s.x < palette);
                if (s.x >= palette) {
                    atomicOr(&errors[img.image_index], ERR_PALETTE);
                }
                let lo = cp_residuals[CP_PALETTE_BASE + 2u * index];
                let hi = cp_residuals[CP_PALETTE_BASE + 2u * index + 1u];
                out = vec4<u32>(lo & 0xffffu, lo >> 16u, hi & 0xffffu, hi >> 16u);
            }
            for (var c = 0u; c < channels; c = c + 1u) {
                row_sample(img, c, y, x0 + x, out[c]);
            }
        }
    }
    // The row is complete before the next one reads it (and its output words are).
    workgroupBarrier();
    end_row(img, y, x0, pw, lid);
}

// Decodes the patch of chunk-local workgroup `wg` of version-2 image `img`.
fn decode_compact_patch(wg: u32, img: ImageInfo, lid: u32) {
    let ps = 1u << img.patch_log2;
    let patch_index = wg - img.wg_base;
    let g = img.stream_base + patch_index;
    let x0 = (img.patch_col0 + patch_index % img.patches_x) * ps;
    let y0 = (img.patch_row0 + patch_index / img.patches_x) * ps;
    let pw = min(ps, img.width - x0);
    let ph = min(ps, img.height - y0);
    // At least one, whatever a bad image table says (lid / segs below).
    let segs = max(cp_segments(ps, ph), 1u);
    let channels = min(img.channels, MAX_CHANNELS);
    if (lid == 0u) {
        cp_status = 0u;
        var flags = ERR_RANGE;
        if (patch_index < img.stream_count && ps <= MAX_PATCH) {
            let start = offsets[g];
            let size = sizes[g];
            if (size != 0u && start < params.input_bytes && size <= params.input_bytes - start) {
                flags = cp_parse_header(start, size, channels, img.depth, segs);
            }
        }
        if (flags != 0u) {
            atomicOr(&errors[img.image_index], flags);
        }
    }
    for (var i = lid; i < MAX_CHANNELS * MAX_PATCH; i = i + WG) {
        cp_previous[i] = 0u;
    }
    // A barrier, and the header's verdict as a uniform value.
    let status = workgroupUniformLoad(&cp_status);
    if ((status & CP_HEADER_OK) == 0u) {
        return;
    }
    // The coded planes: the channels, or the palette's index plane.
    let palette = workgroupUniformLoad(&cp_palette_count);
    let coded = select(channels, 1u, palette > 0u);
    cp_fill_fast(lid, coded);
    // The lookup tables are complete before any invocation decodes.
    workgroupBarrier();
    let start = offsets[g];
    let singles = cp_token_count(img.depth);
    // Decoding role: invocation c * segs + s owns segment s of channel c.
    let dc = lid / segs;
    let ds = lid % segs;
    var decoding = dc < coded;
    var pos = 0u;
    var end = 0u;
    if (decoding) {
        pos = cp_segment_start[dc * SEGMENT_SLOTS + ds];
        end = cp_segment_start[dc * SEGMENT_SLOTS + ds + 1u];
    }
    let scan = (status & CP_ANY_LEFT) != 0u;
    let phases = (ph + segs - 1u) / segs;
    for (var k = 0u; k < phases; k = k + 1u) {
        if (decoding && k * segs + ds < ph) {
            let f = cp_decode_row(start, &pos, end, dc, ds * ps, pw, singles);
            if (f != 0u) {
                decoding = false;
                atomicOr(&errors[img.image_index], f);
            }
        }
        workgroupBarrier();
        for (var s = 0u; s < segs; s = s + 1u) {
            let y = k * segs + s;
            if (y < ph) {
                cp_output_row(img, lid, s, ps, pw, x0, y0 + y, coded, channels, palette, scan);
            }
        }
    }
    // Every segment's rows use exactly its stored length.
    if (decoding && pos != end) {
        atomicOr(&errors[img.image_index], ERR_SEGMENT);
    }
}
