// The version-1 (fast) decode body shared by every output layout (entry point `main` in
// decode.wgsl; CPU twin: `gpu::cpu_twin::decode_streams`). A workgroup of 64 invocations
// takes 64 / patch_size consecutive streams of one image (one stream when the patch is 64 or
// 128 wide); one invocation per column (128-wide patches: two columns each); rows in order,
// the previous row in workgroup memory. Each decoded sample goes to
// `put_sample(img, ch, y, x, v)`, which the output layout's file in output/ defines (y, x:
// pixel position in the image, or in its band) and which writes it straight to the output.
// An inconsistent
// stream sets flag bits in `errors[image]` and its invocations stop working (they still
// meet the workgroup's barriers); every loop is bounded by the patch size.
//
// decode.wgsl declares `input_words`, `sizes`, `offsets`, `images`, `errors` and `params`.

// WG (the workgroup size), MAX_PATCH and the format constants come from the generated prelude.

// Two rows, ping-pong: row r of the workgroup's streams is at (r % 2) * MAX_PATCH; stream
// `sub` of the workgroup uses columns sub * patch_size ..
var<workgroup> rows: array<u32, 2u * MAX_PATCH>;

// `wg` is the chunk-local workgroup index, `img` its image.
fn decode_streams(wg: u32, img: ImageInfo, lid: u32) {
    let ps = 1u << img.patch_log2;
    // Streams per workgroup and invocations per stream.
    let step = min(ps, WG);
    let per_wg = WG / step;
    let sub = lid / step;
    let lane = lid % step;
    let local = (wg - img.wg_base) * per_wg + sub;
    let g = img.stream_base + local;
    let col0 = sub * step;

    var alive = local < img.stream_count;
    var predictor = 0u;
    var start = 0u;
    var size = STREAM_PREFIX_LEN;
    var x0 = 0u;
    var y0 = 0u;
    var pw = 1u;
    var ph = 0u;
    var ch = 0u;
    if (alive) {
        let patch_index = local / img.channels;
        ch = local % img.channels;
        x0 = (img.patch_col0 + patch_index % img.patches_x) * ps;
        y0 = (img.patch_row0 + patch_index / img.patches_x) * ps;
        pw = min(ps, img.width - x0);
        ph = min(ps, img.height - y0);
        start = offsets[g];
        size = sizes[g];
        var flags = 0u;
        if (size == 0u || start >= params.input_bytes || size > params.input_bytes - start || pw > MAX_PATCH) {
            flags = ERR_RANGE;
        } else {
            predictor = read_byte(start);
            if (predictor > PREDICTOR_MAX_ID) {
                flags = ERR_PREDICTOR;
            }
        }
        if (flags != 0u) {
            alive = false;
            if (lane == 0u) {
                atomicOr(&errors[img.image_index], flags);
            }
        }
    }
    let depth = img.depth;
    let nb = select(NBIT_FIELD_BITS_16, NBIT_FIELD_BITS_8, depth == 8u);
    let mask = (1u << depth) - 1u;
    let bits_base = start + STREAM_PREFIX_LEN;
    let total_bits = (size - STREAM_PREFIX_LEN) * 8u;
    var pos = 0u;
    // The loop bound and the barrier are uniform (one image per workgroup); the invocations
    // of a stream all read the same row header, so they agree on `alive`.
    for (var row = 0u; row < ps; row = row + 1u) {
        if (alive && row < ph) {
            var f = 0u;
            var nbit = 0u;
            var base = 0u;
            if (pos + nb + depth > total_bits) {
                f = ERR_OVERRUN;
            } else {
                nbit = read_bits(bits_base, pos, nb);
                if (nbit > depth) {
                    f = ERR_BIT_WIDTH;
                } else {
                    base = read_bits(bits_base, pos + nb, depth);
                    if (pos + nb + depth + pw * nbit > total_bits) {
                        f = ERR_OVERRUN;
                    }
                }
            }
            if (f != 0u) {
                alive = false;
                if (lane == 0u) {
                    atomicOr(&errors[img.image_index], f);
                }
            } else {
                let dpos = pos + nb + depth;
                let cur = (row & 1u) * MAX_PATCH + col0;
                let prev = MAX_PATCH - (row & 1u) * MAX_PATCH + col0;
                for (var x = lane; x < pw; x = x + step) {
                    let d = read_bits(bits_base, dpos + x * nbit, nbit);
                    var p = 0u;
                    if (row > 0u && predictor != 0u) {
                        let b = rows[prev + x];
                        let a = select(b, rows[prev + max(x, 1u) - 1u], x > 0u);
                        let c = select(b, rows[prev + min(x + 1u, pw - 1u)], x + 1u < pw);
                        p = predict_one(predictor, a, b, c);
                    }
                    let v = (p + base + d) & mask;
                    rows[cur + x] = v;
                    put_sample(img, ch, y0 + row, x0 + x, v);
                }
                pos = dpos + pw * nbit;
            }
        }
        workgroupBarrier();
    }
    if (alive && lane == 0u) {
        // The rows must use the whole stream, and the padding bits must be zero.
        var bad = (pos + 7u) / 8u != size - STREAM_PREFIX_LEN;
        if (!bad && (pos & 7u) != 0u) {
            bad = read_bits(bits_base, pos, 8u - (pos & 7u)) != 0u;
        }
        if (bad) {
            atomicOr(&errors[img.image_index], ERR_TRAILING);
        }
    }
}
