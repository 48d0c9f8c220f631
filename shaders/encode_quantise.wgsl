// The error-bounded encoder, stage 1 (differences predictor): the extent of the regular
// values, the bins, and the exception fill. CPU twin: gpu/cpu_twin/encode.rs; the CPU rule it
// matches bit for bit is `BinRule` in field/bounded/encode.rs (its comment has the proof that
// the bound holds and that flushed subnormals change nothing).
//
// Entry points, in order (one submission for `value_range`, its result read back; the rest
// in the next):
// - `value_range`: one invocation per RANGE_ITEM values; the order keys of the smallest and largest regular
//   value by atomicMin / atomicMax into `extent` (the host sets them to u32::MAX and 0).
// - `quantise`: one invocation per value: its bin, or NO_BIN for an exception.
// - `fill_blocks`: one invocation per block: its last and first regular bin (NO_BIN: none).
// - `fill_carry`: one invocation: per block the last regular bin before it, and the array's
//   first regular bin.
// - `fill_apply`: one invocation per block: each exception takes the last regular bin before
//   it (before the first regular value: that value's bin; without one: 0), and the
//   exception flags of the block's values are written.

// Whether the value with f32 bits `b` is not regular: NaN, infinity, subnormal, the fill.
fn is_special(b: u32) -> bool {
    let e = (b >> 23u) & 0xffu;
    let subnormal = e == 0u && (b & 0x7fffffu) != 0u;
    return e == 255u || subnormal || (params.has_fill != 0u && b == params.fill_bits);
}

// An order key of a non-NaN f32: the unsigned order of keys is f32::total_cmp's.
fn order_key(b: u32) -> u32 {
    return select(b ^ 0x80000000u, ~b, (b >> 31u) == 1u);
}

@compute @workgroup_size(ENCODE_WG)
fn value_range(@builtin(workgroup_id) wid: vec3<u32>,
               @builtin(local_invocation_index) lid: u32,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    // Workgroup `w` reads RANGE_ITEM x ENCODE_WG values from w RANGE_ITEM ENCODE_WG, its
    // invocations side by side.
    let w = wid.y * nwg.x + wid.x;
    var lo = 0xffffffffu;
    var hi = 0u;
    var any = false;
    for (var j = 0u; j < RANGE_ITEM; j++) {
        let i = (w * RANGE_ITEM + j) * ENCODE_WG + lid;
        if (i >= params.count) {
            break;
        }
        let b = values[i];
        if (is_special(b)) {
            continue;
        }
        let k = order_key(b);
        lo = min(lo, k);
        hi = max(hi, k);
        any = true;
    }
    if (any) {
        atomicMin(&extent[0], lo);
        atomicMax(&extent[1], hi);
    }
}

// Whether bin `c` reconstructs `v` within the bound (BinRule::bin's test).
fn fits(c: i32, v: f32, off: f32, w: f32, bound: f32) -> bool {
    if (c < 0i || c >= i32(BOUNDED_MAX_BINS)) {
        return false;
    }
    let r = off + f32(c) * w;
    let rb = bitcast<u32>(r);
    let subnormal = (rb & 0x7f800000u) == 0u && (rb & 0x7fffffu) != 0u;
    return !subnormal && abs(r - v) < bound;
}

// The bin of the regular value with bits `b` (BinRule::bin): c0, c0 - 1, c0 + 1, or NO_BIN.
fn bin_of(b: u32) -> u32 {
    let v = bitcast<f32>(b);
    let off = bitcast<f32>(params.offset_bits);
    let w = bitcast<f32>(params.width_bits);
    let c0 = i32(round((v - off) * bitcast<f32>(params.inv_bits)));
    let bound = bitcast<f32>(params.bound_bits);
    if (fits(c0, v, off, w, bound)) {
        return u32(c0);
    }
    if (fits(c0 - 1i, v, off, w, bound)) {
        return u32(c0 - 1i);
    }
    if (fits(c0 + 1i, v, off, w, bound)) {
        return u32(c0 + 1i);
    }
    return NO_BIN;
}

@compute @workgroup_size(ENCODE_WG)
fn quantise(@builtin(global_invocation_id) gid: vec3<u32>,
            @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = item(gid, nwg);
    if (i >= params.count) {
        return;
    }
    let b = values[i];
    q[i] = select(bin_of(b), NO_BIN, is_special(b));
}

// The values of block `k`: [x, y).
fn block_range(k: u32) -> vec2<u32> {
    let start = k * params.block;
    return vec2<u32>(start, min(params.count, start + params.block));
}

@compute @workgroup_size(ENCODE_WG)
fn fill_blocks(@builtin(global_invocation_id) gid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let k = item(gid, nwg);
    if (k < params.blocks) {
        let r = block_range(k);
        var last = NO_BIN;
        var first = NO_BIN;
        for (var i = r.x; i < r.y; i++) {
            let c = q[i];
            if (c != NO_BIN) {
                last = c;
                if (first == NO_BIN) {
                    first = c;
                }
            }
        }
        fill[FILL_WORDS * k] = last;
        fill[FILL_WORDS * k + 1u] = first;
    }
}

@compute @workgroup_size(ENCODE_WG)
fn fill_carry(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x != 0u) {
        return;
    }
    var prev = NO_BIN;
    var first = NO_BIN;
    for (var k = 0u; k < params.blocks; k++) {
        fill[FILL_WORDS * k + 2u] = prev;
        let last = fill[FILL_WORDS * k];
        if (last != NO_BIN) {
            prev = last;
        }
        if (first == NO_BIN) {
            first = fill[FILL_WORDS * k + 1u];
        }
    }
    fill[FILL_WORDS * params.blocks] = first;
}

@compute @workgroup_size(ENCODE_WG)
fn fill_apply(@builtin(global_invocation_id) gid: vec3<u32>,
              @builtin(num_workgroups) nwg: vec3<u32>) {
    let k = item(gid, nwg);
    if (k < params.blocks) {
        let r = block_range(k);
        var cur = fill[FILL_WORDS * k + 2u];
        if (cur == NO_BIN) {
            cur = fill[FILL_WORDS * params.blocks];
        }
        if (cur == NO_BIN) {
            cur = 0u;
        }
        var word = 0u;
        for (var i = r.x; i < r.y; i++) {
            let c = q[i];
            if (c == NO_BIN) {
                q[i] = cur;
                word |= 1u << (i % 32u);
            } else {
                cur = c;
            }
            if (i % 32u == 31u || i + 1u == r.y) {
                fill[params.flags_at + i / 32u] = word;
                word = 0u;
            }
        }
    }
}
