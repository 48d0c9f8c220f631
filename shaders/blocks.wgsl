// Block-coded arrays (SPEC.md "Block-coded arrays"; the format and the CPU twin of every
// step: field/blocks/mod.rs). Scratch words (`sc`): 0 the decode's error flags; 1 + 19 c + s
// the encode's histogram of symbol s under prediction c (0: none, 1: stride 1, 2: the
// offered stride); 64 + s the chosen code of symbol s, 84 + s its length; 104 the chosen
// stride.
//
// Encode, in one submission (src = the values, dst = the stream; the host clears `sc`):
// - `blocks_histogram`: each value's symbol under the three predictions, histogrammed;
// - `blocks_code` (one invocation): each prediction's code (`code_lengths`) and exact size,
//   the smallest chosen; its lengths and stride into the stream's head;
// - `blocks_sizes`: one workgroup a group: its blocks' bytes and its words;
// - `blocks_scan` (one workgroup): the groups' words to offsets, and the head;
// - `blocks_pack`: one workgroup a group: each value's bits at its place in workgroup memory,
//   then the group's words stored whole.
// Decode (`blocks_decode`; src = the stream, dst = the values): one invocation a block, its
// values in sequence through a decode table in workgroup memory; what is malformed sets a
// bit of sc[0] (the host checked the head, the code and the stream's length).

// `BlocksParams` is generated from src/gpu/abi/blocks.rs (gpu::shaders).

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<storage, read_write> sc: array<atomic<u32>>;
@group(0) @binding(3) var<uniform> bp: BlocksParams;

const NO_Q: i32 = 0x7fffffff;
const SC_HIST: u32 = 1u;
const SC_CODES: u32 = 64u;
const SC_LENGTHS: u32 = 84u;
const SC_STRIDE: u32 = 104u;
const FLAG_CODE: u32 = 1u;
const FLAG_BYTES: u32 = 2u;
const FLAG_OFFSET: u32 = 4u;
const FLAG_RANGE: u32 = 8u;
const NODES: u32 = 38u;
const GROUP_WORDS: u32 = 344u; // 8 blocks of at most 172 bytes

var<workgroup> hist: array<atomic<u32>, 57>;
var<workgroup> bbits: array<atomic<u32>, 8>;
var<workgroup> vbits: array<u32, 256>;
var<workgroup> bstart: array<u32, 9>;
var<workgroup> gw: array<atomic<u32>, GROUP_WORDS>;
var<workgroup> part: array<u32, 512>;
var<workgroup> uni: u32;
var<workgroup> wcodes: array<u32, BLOCKS_SYMBOLS>;
var<workgroup> lut: array<u32, 2048>;

fn group_of(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}

// `fits`: (2k - 1) e is finite and fl(|a - (2k - 1) e|) < e ((2k - 1) e is exact).
fn fits(a: f32, k: u32, e: f32) -> bool {
    let r = f32(2u * k - 1u) * e;
    let rb = bitcast<u32>(r);
    return (rb & 0x7f800000u) != 0x7f800000u && abs(a - r) < e;
}

// `quantise`: the signed step count of the value with bits `b`, or NO_Q (escaped).
fn quantise(b: u32) -> i32 {
    let mag = b & 0x7fffffffu;
    if (mag == 0u) {
        return 0;
    }
    let ex = mag >> 23u;
    if (ex == 255u) {
        return NO_Q;
    }
    let e = bitcast<f32>(bp.e_bits);
    var k = 0u;
    if (ex == 0u) {
        if (bp.e_bits == 0u) {
            return NO_Q;
        }
        k = 1u;
    } else {
        let a = bitcast<f32>(mag);
        let t = a * bitcast<f32>(bp.inv_bits);
        if (!(t < f32(BLOCKS_K_LIMIT - 2u))) {
            return NO_Q;
        }
        let k0 = u32(floor(t));
        if (fits(a, k0 + 1u, e)) {
            k = k0 + 1u;
        } else if (k0 >= 1u && fits(a, k0, e)) {
            k = k0;
        } else if (fits(a, k0 + 2u, e)) {
            k = k0 + 2u;
        } else {
            return NO_Q;
        }
    }
    return select(i32(k), -i32(k), (b >> 31u) == 1u);
}

fn q_at(i: u32) -> i32 {
    return quantise(src[bp.src_at + i]);
}

fn zigzag(d: i32) -> u32 {
    return bitcast<u32>((d << 1u) ^ (d >> 31u));
}

fn bits_of(v: u32) -> u32 {
    return 32u - countLeadingZeros(v);
}

// `symbol_of` of value q predicted by `pred`.
fn symbol(q: i32, pred: i32) -> u32 {
    if (q == NO_Q) {
        return BLOCKS_ESCAPE;
    }
    return bits_of(zigzag(q - pred));
}

fn extra_bits(s: u32) -> u32 {
    if (s == BLOCKS_ESCAPE) {
        return 32u;
    }
    return max(s, 1u) - 1u;
}

// `block_count`.
fn block_count(t: u32) -> u32 {
    if (t <= 1u) {
        return (bp.count + 31u) / 32u;
    }
    return ((bp.count / t + 31u) / 32u) * t;
}

// `block_values`: first index, step, count.
fn block_values(t: u32, b: u32) -> vec3<u32> {
    if (t <= 1u) {
        return vec3<u32>(b * 32u, 1u, min(32u, bp.count - b * 32u));
    }
    let band = b / t;
    let rows = bp.count / t;
    return vec3<u32>(band * 32u * t + b % t, t, min(32u, rows - band * 32u));
}

// The prediction of value j of a block (first index and step `v`) at stride t.
fn predicted(t: u32, v: vec3<u32>, j: u32) -> i32 {
    if (t == 0u || j == 0u) {
        return 0;
    }
    let p = q_at(v.x + (j - 1u) * v.y);
    return select(p, 0, p == NO_Q);
}

@compute @workgroup_size(BLOCKS_WG)
fn blocks_histogram(@builtin(workgroup_id) wid: vec3<u32>,
                    @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    if (lid < 57u) {
        atomicStore(&hist[lid], 0u);
    }
    workgroupBarrier();
    let i = group_of(wid, nwg) * BLOCKS_WG + lid;
    if (i < bp.count) {
        let q = q_at(i);
        atomicAdd(&hist[symbol(q, 0)], 1u);
        // Stride 1: blocks of 32 consecutive values.
        var pred = 0;
        if (i % 32u != 0u) {
            let p = q_at(i - 1u);
            pred = select(p, 0, p == NO_Q);
        }
        atomicAdd(&hist[BLOCKS_SYMBOLS + symbol(q, pred)], 1u);
        let s = bp.offer;
        if (s > 1u) {
            var up = 0;
            if ((i / s) % 32u != 0u) {
                let p = q_at(i - s);
                up = select(p, 0, p == NO_Q);
            }
            atomicAdd(&hist[2u * BLOCKS_SYMBOLS + symbol(q, up)], 1u);
        }
    }
    workgroupBarrier();
    if (lid < 57u) {
        let c = atomicLoad(&hist[lid]);
        if (c != 0u) {
            atomicAdd(&sc[SC_HIST + lid], c);
        }
    }
}

// `code_lengths` of the histogram at sc[SC_HIST + 19 c], into `out`.
fn code_lengths(c: u32, out: ptr<function, array<u32, BLOCKS_SYMBOLS>>) {
    var counts: array<u32, BLOCKS_SYMBOLS>;
    var used = 0u;
    for (var s = 0u; s < BLOCKS_SYMBOLS; s++) {
        counts[s] = atomicLoad(&sc[SC_HIST + c * BLOCKS_SYMBOLS + s]);
        (*out)[s] = 0u;
        if (counts[s] > 0u) {
            used++;
        }
    }
    if (used == 0u) {
        return;
    }
    if (used == 1u) {
        for (var s = 0u; s < BLOCKS_SYMBOLS; s++) {
            if (counts[s] > 0u) {
                (*out)[s] = 1u;
            }
        }
        return;
    }
    var weight: array<u32, NODES>;
    var parent: array<u32, NODES>;
    var alive: array<bool, NODES>;
    for (var i = 0u; i < NODES; i++) {
        weight[i] = 0u;
        parent[i] = 0xffffffffu;
        alive[i] = false;
    }
    for (var s = 0u; s < BLOCKS_SYMBOLS; s++) {
        weight[s] = counts[s];
        alive[s] = counts[s] > 0u;
    }
    var next = BLOCKS_SYMBOLS;
    for (var m = 0u; m + 1u < used; m++) {
        var pick: array<u32, 2>;
        for (var p = 0u; p < 2u; p++) {
            var best = 0xffffffffu;
            for (var i = 0u; i < next; i++) {
                if (alive[i] && (best == 0xffffffffu || weight[i] < weight[best])) {
                    best = i;
                }
            }
            alive[best] = false;
            pick[p] = best;
        }
        weight[next] = weight[pick[0]] + weight[pick[1]];
        parent[pick[0]] = next;
        parent[pick[1]] = next;
        alive[next] = true;
        next++;
    }
    var per_length: array<u32, 12>;
    for (var l = 0u; l < 12u; l++) {
        per_length[l] = 0u;
    }
    for (var s = 0u; s < BLOCKS_SYMBOLS; s++) {
        if (counts[s] > 0u) {
            var depth = 0u;
            var i = s;
            while (parent[i] != 0xffffffffu) {
                i = parent[i];
                depth++;
            }
            per_length[min(depth, BLOCKS_MAX_CODE)]++;
        }
    }
    var total = 0u;
    for (var l = 1u; l <= BLOCKS_MAX_CODE; l++) {
        total += per_length[l] << (BLOCKS_MAX_CODE - l);
    }
    while (total > (1u << BLOCKS_MAX_CODE)) {
        per_length[BLOCKS_MAX_CODE]--;
        for (var l = BLOCKS_MAX_CODE - 1u; l >= 1u; l--) {
            if (per_length[l] > 0u) {
                per_length[l]--;
                per_length[l + 1u] += 2u;
                break;
            }
        }
        total--;
    }
    // The symbol of rank r (heaviest first, ties to the lower symbol) takes the r-th
    // shortest length.
    for (var s = 0u; s < BLOCKS_SYMBOLS; s++) {
        if (counts[s] == 0u) {
            continue;
        }
        var rank = 0u;
        for (var t = 0u; t < BLOCKS_SYMBOLS; t++) {
            if (counts[t] > counts[s] || (counts[t] == counts[s] && counts[t] > 0u && t < s)) {
                rank++;
            }
        }
        var l = 1u;
        var below = per_length[1];
        while (below <= rank) {
            l++;
            below += per_length[l];
        }
        (*out)[s] = l;
    }
}

// `canonical_codes` of valid lengths (bit-reversed codes).
fn canonical(lengths: ptr<function, array<u32, BLOCKS_SYMBOLS>>,
             codes: ptr<function, array<u32, BLOCKS_SYMBOLS>>) {
    var per_length: array<u32, 12>;
    for (var l = 0u; l < 12u; l++) {
        per_length[l] = 0u;
    }
    for (var s = 0u; s < BLOCKS_SYMBOLS; s++) {
        per_length[min((*lengths)[s], 11u)]++;
    }
    var first: array<u32, 12>;
    var code = 0u;
    first[0] = 0u;
    for (var l = 1u; l <= BLOCKS_MAX_CODE; l++) {
        if (l > 1u) {
            code += per_length[l - 1u];
        }
        code = code << 1u;
        first[l] = code;
    }
    var seen: array<u32, 12>;
    for (var l = 0u; l < 12u; l++) {
        seen[l] = 0u;
    }
    for (var s = 0u; s < BLOCKS_SYMBOLS; s++) {
        let l = (*lengths)[s];
        (*codes)[s] = 0u;
        if (l > 0u) {
            let c = first[l] + seen[l];
            seen[l]++;
            (*codes)[s] = reverseBits(c) >> (32u - l);
        }
    }
}

// `acc + n per` in 64 bits (two words, low first), `per` at most 2^16.
fn mul_add(acc: vec2<u32>, n: u32, per: u32) -> vec2<u32> {
    let a = (n & 0xffffu) * per;
    let b = (n >> 16u) * per;
    let add = a + (b << 16u);
    let c1 = select(0u, 1u, add < a);
    let lo = acc.x + add;
    let c2 = select(0u, 1u, lo < acc.x);
    return vec2<u32>(lo, acc.y + (b >> 16u) + c1 + c2);
}

@compute @workgroup_size(1)
fn blocks_code() {
    var best_bits = 0xffffffffu;
    var best_hi = 0xffffffffu;
    var best_c = 0u;
    var best: array<u32, BLOCKS_SYMBOLS>;
    var n_candidates = 2u;
    if (bp.offer > 1u) {
        n_candidates = 3u;
    }
    for (var c = 0u; c < n_candidates; c++) {
        var lengths: array<u32, BLOCKS_SYMBOLS>;
        code_lengths(c, &lengths);
        // The size in bits, as two words (it may pass 2^32).
        var acc = vec2<u32>(0u, 0u);
        for (var s = 0u; s < BLOCKS_SYMBOLS; s++) {
            let n = atomicLoad(&sc[SC_HIST + c * BLOCKS_SYMBOLS + s]);
            acc = mul_add(acc, n, lengths[s] + extra_bits(s));
        }
        // Each block's length byte and half a byte of padding (`BLOCK_COST`).
        var stride_c = c;
        if (c == 2u) {
            stride_c = bp.offer;
        }
        acc = mul_add(acc, block_count(stride_c), BLOCKS_BLOCK_COST);
        let lo = acc.x;
        let hi = acc.y;
        if (hi < best_hi || (hi == best_hi && lo < best_bits)) {
            best_hi = hi;
            best_bits = lo;
            best_c = c;
            best = lengths;
        }
    }
    var codes: array<u32, BLOCKS_SYMBOLS>;
    canonical(&best, &codes);
    var packed: array<u32, 3>;
    packed[0] = 0u;
    packed[1] = 0u;
    packed[2] = 0u;
    for (var s = 0u; s < BLOCKS_SYMBOLS; s++) {
        atomicStore(&sc[SC_CODES + s], codes[s]);
        atomicStore(&sc[SC_LENGTHS + s], best[s]);
        packed[s / 8u] |= best[s] << (4u * (s % 8u));
    }
    var stride = best_c;
    if (best_c == 2u) {
        stride = bp.offer;
    }
    atomicStore(&sc[SC_STRIDE], stride);
    dst[bp.dst_at + 4u] = packed[0];
    dst[bp.dst_at + 5u] = packed[1];
    dst[bp.dst_at + 6u] = packed[2];
    dst[bp.dst_at + 7u] = stride;
}

// The chosen stride, as a value uniform across the workgroup.
fn chosen_stride(lid: u32) -> u32 {
    if (lid == 0u) {
        uni = atomicLoad(&sc[SC_STRIDE]);
    }
    return workgroupUniformLoad(&uni);
}

// Bits of value j of block b (first, step, count in `v`) at stride t: its code and extra.
fn value_bits(t: u32, v: vec3<u32>, j: u32) -> u32 {
    let q = q_at(v.x + j * v.y);
    let s = symbol(q, predicted(t, v, j));
    return atomicLoad(&sc[SC_LENGTHS + s]) + extra_bits(s);
}

@compute @workgroup_size(BLOCKS_WG)
fn blocks_sizes(@builtin(workgroup_id) wid: vec3<u32>,
                @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let t = chosen_stride(lid);
    let blocks = block_count(t);
    let groups = (blocks + 7u) / 8u;
    let g = group_of(wid, nwg);
    if (g >= groups) {
        return;
    }
    if (lid < 8u) {
        atomicStore(&bbits[lid], 0u);
    }
    workgroupBarrier();
    let bl = lid % 8u;
    let j = lid / 8u;
    let b = g * 8u + bl;
    if (b < blocks) {
        let v = block_values(t, b);
        if (j < v.z) {
            atomicAdd(&bbits[bl], value_bits(t, v, j));
        }
    }
    workgroupBarrier();
    if (lid == 0u) {
        var words: array<u32, 2>;
        words[0] = 0u;
        words[1] = 0u;
        var bytes = 0u;
        for (var k = 0u; k < 8u; k++) {
            let nb = (atomicLoad(&bbits[k]) + 7u) / 8u;
            bytes += nb;
            words[k / 4u] |= nb << (8u * (k % 4u));
        }
        let bytes_at = bp.dst_at + BLOCKS_HEAD_WORDS + groups;
        dst[bytes_at + 2u * g] = words[0];
        if (2u * g + 1u < (blocks + 3u) / 4u) {
            dst[bytes_at + 2u * g + 1u] = words[1];
        }
        dst[bp.dst_at + BLOCKS_HEAD_WORDS + g] = (bytes + 3u) / 4u;
    }
}

@compute @workgroup_size(BLOCKS_WG)
fn blocks_scan(@builtin(local_invocation_index) lid: u32) {
    let t = chosen_stride(lid);
    let blocks = block_count(t);
    let groups = (blocks + 7u) / 8u;
    let at = bp.dst_at + BLOCKS_HEAD_WORDS;
    let per = (groups + BLOCKS_WG - 1u) / BLOCKS_WG;
    let lo = min(lid * per, groups);
    let hi = min(lo + per, groups);
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
        var v = part[rd + lid];
        if (lid >= off) {
            v += part[rd + lid - off];
        }
        part[wr + lid] = v;
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

// ORs `n <= 16` bits of `v` at bit `pos` of the group's words.
fn put(pos: u32, v: u32, n: u32) {
    if (n == 0u) {
        return;
    }
    let w = pos / 32u;
    let s = pos % 32u;
    let m = v & ((1u << n) - 1u);
    atomicOr(&gw[w], m << s);
    if (s + n > 32u) {
        atomicOr(&gw[w + 1u], m >> (32u - s));
    }
}

@compute @workgroup_size(BLOCKS_WG)
fn blocks_pack(@builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let t = chosen_stride(lid);
    let blocks = block_count(t);
    let groups = (blocks + 7u) / 8u;
    let g = group_of(wid, nwg);
    if (g >= groups) {
        return;
    }
    for (var w = lid; w < GROUP_WORDS; w += BLOCKS_WG) {
        atomicStore(&gw[w], 0u);
    }
    let bl = lid % 8u;
    let j = lid / 8u;
    let b = g * 8u + bl;
    var v = vec3<u32>(0u, 0u, 0u);
    var q = 0;
    var s = 0u;
    var nbits = 0u;
    if (b < blocks) {
        v = block_values(t, b);
        if (j < v.z) {
            q = q_at(v.x + j * v.y);
            s = symbol(q, predicted(t, v, j));
            nbits = atomicLoad(&sc[SC_LENGTHS + s]) + extra_bits(s);
        }
    }
    vbits[bl * 32u + j] = nbits;
    workgroupBarrier();
    if (lid == 0u) {
        var at = 0u;
        for (var k = 0u; k < 8u; k++) {
            bstart[k] = at;
            var sum = 0u;
            for (var m = 0u; m < 32u; m++) {
                sum += vbits[k * 32u + m];
            }
            at += 8u * ((sum + 7u) / 8u);
        }
        bstart[8] = at;
    }
    workgroupBarrier();
    if (nbits > 0u) {
        var pos = bstart[bl];
        for (var m = 0u; m < j; m++) {
            pos += vbits[bl * 32u + m];
        }
        let len = atomicLoad(&sc[SC_LENGTHS + s]);
        put(pos, atomicLoad(&sc[SC_CODES + s]), len);
        pos += len;
        if (s == BLOCKS_ESCAPE) {
            let raw = src[bp.src_at + v.x + j * v.y];
            put(pos, raw & 0xffffu, 16u);
            put(pos + 16u, raw >> 16u, 16u);
        } else if (s >= 2u) {
            let z = zigzag(q - predicted(t, v, j));
            put(pos, z, s - 1u);
        }
    }
    workgroupBarrier();
    let words = (bstart[8] + 31u) / 32u;
    let payload_at = bp.dst_at + BLOCKS_HEAD_WORDS + groups + (blocks + 3u) / 4u;
    let base = payload_at + dst[bp.dst_at + BLOCKS_HEAD_WORDS + g];
    for (var w = lid; w < words; w += BLOCKS_WG) {
        dst[base + w] = atomicLoad(&gw[w]);
    }
}

// `n <= 16` bits at bit `pos` from word `at` of `src`, none at or past word `end`.
fn take(at: u32, end: u32, pos: u32, n: u32) -> u32 {
    let k = at + pos / 32u;
    let s = pos % 32u;
    var v = 0u;
    if (k < end) {
        v = src[k] >> s;
    }
    if (s + n > 32u && k + 1u < end) {
        v |= src[k + 1u] << (32u - s);
    }
    return v & ((1u << n) - 1u);
}

// Byte count of block b from the stream's length words at `bytes_at`.
fn block_bytes(bytes_at: u32, b: u32) -> u32 {
    return (src[bytes_at + b / 4u] >> (8u * (b % 4u))) & 0xffu;
}

@compute @workgroup_size(BLOCKS_WG)
fn blocks_decode(@builtin(workgroup_id) wid: vec3<u32>,
                 @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let head = bp.src_at;
    if (lid == 0u) {
        var lengths: array<u32, BLOCKS_SYMBOLS>;
        for (var s = 0u; s < BLOCKS_SYMBOLS; s++) {
            lengths[s] = (src[head + 4u + s / 8u] >> (4u * (s % 8u))) & 0xfu;
        }
        var codes: array<u32, BLOCKS_SYMBOLS>;
        canonical(&lengths, &codes);
        for (var s = 0u; s < BLOCKS_SYMBOLS; s++) {
            wcodes[s] = codes[s] | (lengths[s] << 16u);
        }
    }
    workgroupBarrier();
    for (var m = 0u; m < 8u; m++) {
        let idx = lid + m * BLOCKS_WG;
        var entry = 0u;
        for (var s = 0u; s < BLOCKS_SYMBOLS; s++) {
            let l = wcodes[s] >> 16u;
            if (l > 0u && (idx & ((1u << l) - 1u)) == (wcodes[s] & 0xffffu)) {
                entry = s | (l << 8u);
            }
        }
        lut[idx] = entry;
    }
    workgroupBarrier();
    let b = group_of(wid, nwg) * BLOCKS_WG + lid;
    if (b >= bp.blocks) {
        return;
    }
    let t = bp.stride;
    let g = b / 8u;
    let offsets_at = head + BLOCKS_HEAD_WORDS;
    let bytes_at = offsets_at + bp.groups;
    let payload_at = bytes_at + (bp.blocks + 3u) / 4u;
    let end = payload_at + bp.payload_words;
    var before = 0u;
    for (var k = g * 8u; k < b; k++) {
        before += block_bytes(bytes_at, k);
    }
    let nbytes = block_bytes(bytes_at, b);
    var bad = 0u;
    if (nbytes > BLOCKS_MAX_BLOCK_BYTES) {
        bad |= FLAG_BYTES;
    }
    let start = src[offsets_at + g];
    if (b % 8u == 0u) {
        // The group's words: its offset to the next group's (or the payload's end).
        var total = 0u;
        for (var k = b; k < min(b + 8u, bp.blocks); k++) {
            total += block_bytes(bytes_at, k);
        }
        var next = bp.payload_words;
        if (g + 1u < bp.groups) {
            next = src[offsets_at + g + 1u];
        }
        if (next < start || next - start != (total + 3u) / 4u) {
            bad |= FLAG_OFFSET;
        }
    }
    let at = payload_at + start;
    let v = block_values(t, b);
    let e = bitcast<f32>(bp.e_bits);
    var pos = 8u * before;
    var prev = 0;
    for (var j = 0u; j < v.z; j++) {
        let entry = lut[take(at, end, pos, BLOCKS_MAX_CODE)];
        let l = entry >> 8u;
        if (l == 0u) {
            bad |= FLAG_CODE;
            break;
        }
        pos += l;
        let s = entry & 0xffu;
        var out = 0u;
        if (s == BLOCKS_ESCAPE) {
            out = take(at, end, pos, 16u) | (take(at, end, pos + 16u, 16u) << 16u);
            pos += 32u;
            prev = 0;
        } else {
            var z = 0u;
            if (s > 0u) {
                z = (1u << (s - 1u)) | take(at, end, pos, s - 1u);
            }
            pos += max(s, 1u) - 1u;
            var q = bitcast<i32>(z >> 1u) ^ -bitcast<i32>(z & 1u);
            if (t != 0u) {
                q += prev;
            }
            prev = q;
            let k = u32(abs(q));
            if (k >= BLOCKS_K_LIMIT) {
                bad |= FLAG_RANGE;
                break;
            }
            // `reconstruct`.
            if (k != 0u) {
                let r = f32(2u * k - 1u) * e;
                out = bitcast<u32>(r) | select(0u, 0x80000000u, q < 0);
            }
        }
        dst[bp.dst_at + v.x + j * v.y] = out;
    }
    if (bad == 0u && (pos - 8u * before + 7u) / 8u != nbytes) {
        bad |= FLAG_BYTES;
    }
    if (bad != 0u) {
        atomicOr(&sc[0], bad);
    }
}
