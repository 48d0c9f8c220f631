// The version-1 (fast) decode body shared by every output layout (entry point `main` in
// decode.wgsl; CPU twin: `gpu::cpu_twin::decode_streams`). A workgroup of 64 invocations
// takes 64 / patch_size consecutive patches of one image (one patch when the patch is 64 or
// 128 wide), every channel of each: one invocation per column (128-wide patches: two columns
// each), which decodes the row of every channel's stream in turn; rows in order, the previous
// row of every channel in workgroup memory. A layout that writes samples one by one
// (`OUTPUT_PACKED` false) gets each from `put_sample(img, ch, y, x, v)` as it is decoded; the
// packed interleaved layout gets each patch row, after the row's barrier, as whole output
// words from `pack_row` through `put_word` (plain stores, except for the at most two words a
// row shares with its neighbours: no atomic per sample). The layout's file in output/
// defines `OUTPUT_PACKED`, `put_sample` and `put_word`. An inconsistent stream sets flag bits
// in `errors[image]` and stops decoding (its invocations still meet the workgroup's
// barriers; a flagged image's output is unspecified); every loop is bounded by the patch
// size or the channel count.
//
// decode.wgsl declares `input_words`, `sizes`, `offsets`, `images`, `errors` and `params`.

// WG (the workgroup size), MAX_PATCH, MAX_CHANNELS and the format constants come from the
// generated prelude.

// Two rows of every channel, ping-pong: row r, channel c of the patch in columns
// col0 .. col0 + patch size (patch `sub` of the workgroup: col0 = sub * patch size) at
// ((r % 2) * MAX_CHANNELS + c) * MAX_PATCH + col0.
var<workgroup> rows: array<u32, 2u * MAX_CHANNELS * MAX_PATCH>;

// `wg` is the chunk-local workgroup index, `img` its image.
fn decode_streams(wg: u32, img: ImageInfo, lid: u32) {
    let ps = 1u << img.patch_log2;
    // Patches per workgroup and invocations per patch.
    let step = min(ps, WG);
    let per_wg = WG / step;
    let sub = lid / step;
    let lane = lid % step;
    let channels = min(img.channels, MAX_CHANNELS);
    let patch_index = (wg - img.wg_base) * per_wg + sub;
    let col0 = sub * step;

    // Per channel c: bit c of `alive` while its stream decodes; its predictor, payload start
    // byte, payload bits and bit position.
    var alive = 0u;
    var predictor = vec4<u32>(0u);
    var bits_base = vec4<u32>(0u);
    var total_bits = vec4<u32>(0u);
    var pos = vec4<u32>(0u);
    var x0 = 0u;
    var y0 = 0u;
    var pw = 1u;
    var ph = 0u;
    if (patch_index < img.stream_count / max(channels, 1u)) {
        x0 = (img.patch_col0 + patch_index % img.patches_x) * ps;
        y0 = (img.patch_row0 + patch_index / img.patches_x) * ps;
        pw = min(ps, img.width - x0);
        ph = min(ps, img.height - y0);
        for (var c = 0u; c < channels; c = c + 1u) {
            let g = img.stream_base + patch_index * channels + c;
            let start = offsets[g];
            let size = sizes[g];
            var flags = 0u;
            if (size == 0u || start >= params.input_bytes || size > params.input_bytes - start || pw > MAX_PATCH) {
                flags = ERR_RANGE;
            } else {
                predictor[c] = read_byte(start);
                if (predictor[c] > PREDICTOR_MAX_ID) {
                    flags = ERR_PREDICTOR;
                }
            }
            if (flags != 0u) {
                if (lane == 0u) {
                    atomicOr(&errors[img.image_index], flags);
                }
            } else {
                alive = alive | (1u << c);
                bits_base[c] = start + STREAM_PREFIX_LEN;
                total_bits[c] = (size - STREAM_PREFIX_LEN) * 8u;
            }
        }
    }
    let depth = img.depth;
    let nb = select(NBIT_FIELD_BITS_16, NBIT_FIELD_BITS_8, depth == 8u);
    let mask = (1u << depth) - 1u;
    // The loop bound and the barrier are uniform (one image per workgroup); the invocations
    // of a patch all read the same row headers, so they agree on `alive`.
    for (var row = 0u; row < ps; row = row + 1u) {
        let half = (row & 1u) * MAX_CHANNELS * MAX_PATCH;
        let other = MAX_CHANNELS * MAX_PATCH - half;
        if (row < ph) {
            for (var c = 0u; c < channels; c = c + 1u) {
                if ((alive & (1u << c)) == 0u) {
                    continue;
                }
                let p0 = pos[c];
                let tb = total_bits[c];
                let bb = bits_base[c];
                var f = 0u;
                var nbit = 0u;
                var base = 0u;
                if (p0 + nb + depth > tb) {
                    f = ERR_OVERRUN;
                } else {
                    nbit = read_bits(bb, p0, nb);
                    if (nbit > depth) {
                        f = ERR_BIT_WIDTH;
                    } else {
                        base = read_bits(bb, p0 + nb, depth);
                        if (p0 + nb + depth + pw * nbit > tb) {
                            f = ERR_OVERRUN;
                        }
                    }
                }
                if (f != 0u) {
                    alive = alive & ~(1u << c);
                    if (lane == 0u) {
                        atomicOr(&errors[img.image_index], f);
                    }
                    continue;
                }
                let dpos = p0 + nb + depth;
                let cur = half + c * MAX_PATCH + col0;
                let prev = other + c * MAX_PATCH + col0;
                let pred = predictor[c];
                for (var x = lane; x < pw; x = x + step) {
                    let d = read_bits(bb, dpos + x * nbit, nbit);
                    var p = 0u;
                    if (row > 0u && pred != 0u) {
                        let b = rows[prev + x];
                        let a = select(b, rows[prev + max(x, 1u) - 1u], x > 0u);
                        let cc = select(b, rows[prev + min(x + 1u, pw - 1u)], x + 1u < pw);
                        p = predict_one(pred, a, b, cc);
                    }
                    let v = (p + base + d) & mask;
                    rows[cur + x] = v;
                    if (!OUTPUT_PACKED) {
                        put_sample(img, c, y0 + row, x0 + x, v);
                    }
                }
                pos[c] = dpos + pw * nbit;
            }
        }
        workgroupBarrier();
        if (OUTPUT_PACKED && row < ph) {
            pack_row(img, y0 + row, x0, pw, half + col0, lane, step);
        }
    }
    if (lane == 0u) {
        for (var c = 0u; c < channels; c = c + 1u) {
            if ((alive & (1u << c)) == 0u) {
                continue;
            }
            // The rows must use the whole stream, and the padding bits must be zero.
            let p = pos[c];
            var bad = (p + 7u) / 8u != total_bits[c] / 8u;
            if (!bad && (p & 7u) != 0u) {
                bad = read_bits(bits_base[c], p, 8u - (p & 7u)) != 0u;
            }
            if (bad) {
                atomicOr(&errors[img.image_index], ERR_TRAILING);
            }
        }
    }
}

// Writes pixel row `y`, columns x0 .. x0 + pw of `img` (every channel, from `rows` at
// `at + c * MAX_PATCH + x - x0`) to the interleaved output words it covers, through
// `put_word`: `whole` for a word the row covers entirely (its value is the word), else the
// row's samples in it (its other samples are 0). The patch's `step` invocations share the
// words, `lane` taking every step-th.
fn pack_row(img: ImageInfo, y: u32, x0: u32, pw: u32, at: u32, lane: u32, step: u32) {
    let shift = word_shift(img);
    let channels = min(img.channels, MAX_CHANNELS);
    let span = row_span(img, y, x0, pw);
    let w_end = (span.y + (1u << shift) - 1u) >> shift;
    for (var w = (span.x >> shift) + lane; w < w_end; w = w + step) {
        var value = 0u;
        for (var i = 0u; i < (1u << shift); i = i + 1u) {
            let s = (w << shift) + i;
            if (s >= span.x && s < span.y) {
                let k = s - span.x;
                let v = dequantize(img, rows[at + (k % channels) * MAX_PATCH + k / channels]);
                value = value | (v << (img.depth * i));
            }
        }
        put_word(img, w, value, word_whole(w, shift, span));
    }
}
