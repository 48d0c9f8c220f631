// Block-coded arrays (SPEC.md "Block-coded arrays"; the format and the CPU twin of every
// step: field/blocks/mod.rs). A workgroup is one group: 8 blocks of 32 values, invocation
// `lid` the value 32 b + j of block b.
//
// Encode, in one submission (bindings: src = the values, dst = the stream):
// - `blocks_analyse`: each block's header (`analyse_block`) into the stream, each group's
//   payload words into its group-offset slot;
// - `blocks_scan` (one workgroup): the group-offset slots to exclusive offsets, and the
//   stream's head (magic, values, bound, payload words);
// - `blocks_pack`: each block's payload words (`pack_block`), one invocation a word, at its
//   offset. No atomics on global memory; every payload word written whole, once.
// Decode (`blocks_unpack`; src = the stream, dst = the values): one invocation a value
// (`unpack_value`); a group's offset, headers and masks are checked against the format and
// what fails sets a bit of `flags[0]` (the host checked the head and the stream's length).

// `BlocksParams` is generated from src/gpu/abi/blocks.rs (gpu::shaders).

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<storage, read_write> flags: array<atomic<u32>>;
@group(0) @binding(3) var<uniform> bp: BlocksParams;

const NO_CODE: u32 = 0xffffffffu;
const FLAG_BAD_HEAD: u32 = 1u;
const FLAG_BAD_OFFSET: u32 = 2u;
const FLAG_BAD_MASK: u32 = 4u;

var<workgroup> zmax: array<atomic<u32>, 8>;
var<workgroup> nonzero: array<atomic<u32>, 8>;
var<workgroup> raw: array<atomic<u32>, 8>;
var<workgroup> heads: array<u32, 8>;
var<workgroup> starts: array<u32, 8>;
var<workgroup> vals: array<u32, 256>;
var<workgroup> part: array<u32, 512>;
var<workgroup> ok: atomic<u32>;

fn group_of(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}

// `fits`: (2k - 1) e is finite and fl(|a - (2k - 1) e|) < e ((2k - 1) e is exact).
fn fits(a: f32, k: u32, e: f32) -> bool {
    let r = f32(2u * k - 1u) * e;
    let rb = bitcast<u32>(r);
    return (rb & 0x7f800000u) != 0x7f800000u && abs(a - r) < e;
}

// `quantise`: the zigzag code of the value with bits `b`, or NO_CODE.
fn quantise(b: u32) -> u32 {
    let mag = b & 0x7fffffffu;
    if (mag == 0u) {
        return 0u;
    }
    let ex = mag >> 23u;
    if (ex == 255u) {
        return NO_CODE;
    }
    let e = bitcast<f32>(bp.e_bits);
    var k = 0u;
    if (ex == 0u) {
        if (bp.e_bits == 0u) {
            return NO_CODE;
        }
        k = 1u;
    } else {
        let a = bitcast<f32>(mag);
        let t = a * bitcast<f32>(bp.inv_bits);
        if (!(t < f32(BLOCKS_K_LIMIT - 2u))) {
            return NO_CODE;
        }
        let k0 = u32(floor(t));
        if (fits(a, k0 + 1u, e)) {
            k = k0 + 1u;
        } else if (k0 >= 1u && fits(a, k0, e)) {
            k = k0;
        } else if (fits(a, k0 + 2u, e)) {
            k = k0 + 2u;
        } else {
            return NO_CODE;
        }
    }
    return 2u * k - (b >> 31u);
}

fn bits_of(v: u32) -> u32 {
    return 32u - countLeadingZeros(v);
}

// `analyse_block`.
fn block_head(top: u32, mask: u32, is_raw: bool) -> u32 {
    if (is_raw) {
        return BLOCKS_HEAD_RAW;
    }
    let m = countOneBits(mask);
    let plain = bits_of(top);
    if (m > 0u && m < 32u) {
        let w = bits_of(top - 1u);
        if (1u + (m * w + 31u) / 32u < plain) {
            return BLOCKS_FLAG_MASKED | w | (m << 8u);
        }
    }
    return plain;
}

// `block_words`.
fn block_words(h: u32) -> u32 {
    if (h == BLOCKS_HEAD_RAW) {
        return 32u;
    }
    if ((h & BLOCKS_FLAG_MASKED) != 0u) {
        return 1u + ((h >> 8u) * (h & 0x3fu) + 31u) / 32u;
    }
    return h & 0x3fu;
}

// `check_head`.
fn head_ok(h: u32) -> bool {
    let w = h & 0x3fu;
    let m = h >> 8u;
    let kind = h & 0xc0u;
    if (kind == 0x80u) {
        return h == BLOCKS_HEAD_RAW;
    }
    if (kind == 0x40u) {
        return w <= BLOCKS_WIDTH_MAX && m >= 1u && m < 32u && h < 0x10000u;
    }
    return kind == 0u && w <= BLOCKS_WIDTH_MAX && m == 0u;
}

// Word `q` of the bit array holding `count` values of `w` bits from vals[base]: the values
// overlapping bits [32 q, 32 q + 32).
fn gather(base: u32, count: u32, w: u32, q: u32) -> u32 {
    let lo = 32u * q;
    let first = lo / w;
    let last = min(count, (lo + 31u) / w + 1u);
    var word = 0u;
    for (var r = first; r < last; r++) {
        let pos = r * w;
        let v = vals[base + r];
        if (pos >= lo) {
            word |= v << (pos - lo);
        } else {
            word |= v >> (lo - pos);
        }
    }
    return word;
}

@compute @workgroup_size(BLOCKS_WG)
fn blocks_analyse(@builtin(workgroup_id) wid: vec3<u32>,
                  @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let g = group_of(wid, nwg);
    if (g >= bp.groups) {
        return;
    }
    let b = lid / 32u;
    if (lid < 8u) {
        atomicStore(&zmax[lid], 0u);
        atomicStore(&nonzero[lid], 0u);
        atomicStore(&raw[lid], 0u);
    }
    workgroupBarrier();
    let i = g * BLOCKS_WG + lid;
    var z = 0u;
    if (i < bp.count) {
        z = quantise(src[bp.src_at + i]);
    }
    if (z == NO_CODE) {
        atomicOr(&raw[b], 1u);
    } else if (z != 0u) {
        atomicMax(&zmax[b], z);
        atomicOr(&nonzero[b], 1u << (lid % 32u));
    }
    workgroupBarrier();
    if (lid < 8u) {
        var h = 0u;
        if (g * 8u + lid < bp.blocks) {
            h = block_head(atomicLoad(&zmax[lid]), atomicLoad(&nonzero[lid]),
                           atomicLoad(&raw[lid]) != 0u);
        }
        heads[lid] = h;
    }
    workgroupBarrier();
    let heads_at = bp.dst_at + BLOCKS_HEAD_WORDS + bp.groups;
    if (lid < 4u && (g * 4u + lid) * 2u < bp.blocks) {
        dst[heads_at + g * 4u + lid] = heads[2u * lid] | (heads[2u * lid + 1u] << 16u);
    }
    if (lid == 0u) {
        var s = 0u;
        for (var k = 0u; k < 8u; k++) {
            s += block_words(heads[k]);
        }
        dst[bp.dst_at + BLOCKS_HEAD_WORDS + g] = s;
    }
}

@compute @workgroup_size(BLOCKS_WG)
fn blocks_scan(@builtin(local_invocation_index) lid: u32) {
    let at = bp.dst_at + BLOCKS_HEAD_WORDS;
    let per = (bp.groups + BLOCKS_WG - 1u) / BLOCKS_WG;
    let lo = min(lid * per, bp.groups);
    let hi = min(lo + per, bp.groups);
    var s = 0u;
    for (var k = lo; k < hi; k++) {
        s += dst[at + k];
    }
    part[lid] = s;
    workgroupBarrier();
    // Hillis-Steele inclusive scan of the 256 partial sums, double-buffered.
    var rd = 0u;
    for (var off = 1u; off < BLOCKS_WG; off *= 2u) {
        let wr = BLOCKS_WG - rd;
        var t = part[rd + lid];
        if (lid >= off) {
            t += part[rd + lid - off];
        }
        part[wr + lid] = t;
        workgroupBarrier();
        rd = wr;
    }
    let inclusive = part[rd + lid];
    var run = inclusive - s;
    for (var k = lo; k < hi; k++) {
        let v = dst[at + k];
        dst[at + k] = run;
        run += v;
    }
    if (lid == BLOCKS_WG - 1u) {
        dst[bp.dst_at] = BLOCKS_MAGIC;
        dst[bp.dst_at + 1u] = bp.count;
        dst[bp.dst_at + 2u] = bp.e_bits;
        dst[bp.dst_at + 3u] = inclusive;
    }
}

@compute @workgroup_size(BLOCKS_WG)
fn blocks_pack(@builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let g = group_of(wid, nwg);
    if (g >= bp.groups) {
        return;
    }
    let b = lid / 32u;
    let j = lid % 32u;
    let heads_at = bp.dst_at + BLOCKS_HEAD_WORDS + bp.groups;
    if (lid < 8u) {
        atomicStore(&nonzero[lid], 0u);
        var h = 0u;
        let blk = g * 8u + lid;
        if (blk < bp.blocks) {
            h = (dst[heads_at + blk / 2u] >> (16u * (blk % 2u))) & 0xffffu;
        }
        heads[lid] = h;
    }
    workgroupBarrier();
    if (lid == 0u) {
        var s = dst[bp.dst_at + BLOCKS_HEAD_WORDS + g];
        for (var k = 0u; k < 8u; k++) {
            starts[k] = s;
            s += block_words(heads[k]);
        }
    }
    let i = g * BLOCKS_WG + lid;
    var bits = 0u;
    if (i < bp.count) {
        bits = src[bp.src_at + i];
    }
    let h = heads[b];
    var z = 0u;
    if (h != BLOCKS_HEAD_RAW) {
        z = quantise(bits);
    }
    if (z != 0u) {
        atomicOr(&nonzero[b], 1u << j);
    }
    workgroupBarrier();
    let mask = atomicLoad(&nonzero[b]);
    let masked = (h & BLOCKS_FLAG_MASKED) != 0u;
    if (h == BLOCKS_HEAD_RAW) {
        vals[lid] = bits;
    } else if (masked) {
        if (z != 0u) {
            vals[b * 32u + countOneBits(mask & ((1u << j) - 1u))] = z - 1u;
        }
    } else {
        vals[lid] = z;
    }
    workgroupBarrier();
    let w = h & 0x3fu;
    if (j < block_words(h)) {
        var word = 0u;
        if (h == BLOCKS_HEAD_RAW) {
            word = vals[lid];
        } else if (masked) {
            if (j == 0u) {
                word = mask;
            } else if (w > 0u) {
                word = gather(b * 32u, h >> 8u, w, j - 1u);
            }
        } else {
            word = gather(b * 32u, 32u, w, j);
        }
        let payload_at = heads_at + (bp.blocks + 1u) / 2u;
        dst[payload_at + starts[b] + j] = word;
    }
}

// `w` bits at bit `pos` of the payload words from `at` (`get_bits`), each word read only
// below `end`.
fn get_bits(at: u32, end: u32, pos: u32, w: u32) -> u32 {
    if (w == 0u) {
        return 0u;
    }
    let k = at + pos / 32u;
    let s = pos % 32u;
    var v = 0u;
    if (k < end) {
        v = src[k] >> s;
    }
    if (s + w > 32u && k + 1u < end) {
        v |= src[k + 1u] << (32u - s);
    }
    if (w < 32u) {
        v &= (1u << w) - 1u;
    }
    return v;
}

@compute @workgroup_size(BLOCKS_WG)
fn blocks_unpack(@builtin(workgroup_id) wid: vec3<u32>,
                 @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let g = group_of(wid, nwg);
    if (g >= bp.groups) {
        return;
    }
    let b = lid / 32u;
    let j = lid % 32u;
    let heads_at = bp.src_at + BLOCKS_HEAD_WORDS + bp.groups;
    let payload_at = heads_at + (bp.blocks + 1u) / 2u;
    let end = payload_at + bp.payload_words;
    if (lid == 0u) {
        var s = src[bp.src_at + BLOCKS_HEAD_WORDS + g];
        var bad = 0u;
        for (var k = 0u; k < 8u; k++) {
            let blk = g * 8u + k;
            var h = 0u;
            if (blk < bp.blocks) {
                h = (src[heads_at + blk / 2u] >> (16u * (blk % 2u))) & 0xffffu;
            }
            if (!head_ok(h)) {
                bad |= FLAG_BAD_HEAD;
                h = 0u;
            }
            heads[k] = h;
            starts[k] = s;
            s += block_words(h);
        }
        var next = bp.payload_words;
        if (g + 1u < bp.groups) {
            next = src[bp.src_at + BLOCKS_HEAD_WORDS + g + 1u];
        }
        if (s != next) {
            bad |= FLAG_BAD_OFFSET;
        }
        if (bad != 0u) {
            atomicOr(&flags[0], bad);
        }
    }
    workgroupBarrier();
    let i = g * BLOCKS_WG + lid;
    if (i >= bp.count) {
        return;
    }
    let h = heads[b];
    let at = payload_at + starts[b];
    var out = 0u;
    if (h == BLOCKS_HEAD_RAW) {
        if (at + j < end) {
            out = src[at + j];
        }
    } else {
        let w = h & 0x3fu;
        var z = 0u;
        if ((h & BLOCKS_FLAG_MASKED) != 0u) {
            var mask = 0u;
            if (at < end) {
                mask = src[at];
            }
            if (j == 0u && countOneBits(mask) != (h >> 8u)) {
                atomicOr(&flags[0], FLAG_BAD_MASK);
            }
            if (((mask >> j) & 1u) != 0u) {
                z = 1u + get_bits(at + 1u, end, countOneBits(mask & ((1u << j) - 1u)) * w, w);
            }
        } else {
            z = get_bits(at, end, j * w, w);
        }
        // `reconstruct`.
        if (z != 0u) {
            let k = (z + 1u) / 2u;
            let r = f32(2u * k - 1u) * bitcast<f32>(bp.e_bits);
            out = bitcast<u32>(r) | ((z & 1u) << 31u);
        }
    }
    dst[bp.dst_at + i] = out;
}
