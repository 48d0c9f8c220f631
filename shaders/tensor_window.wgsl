// Windows of tensor records (CPU twin: `gpu::cpu_twin::tensor_window`, held to
// `loader::TensorAugment::apply` bit for bit): each job cuts one sample's window out of one
// array (leading axes whole, 3 spatial axes, a 2-D array padded with an axis of 1), reverses
// the flipped axes, turns the last two by `rot90` quarter turns as `numpy.rot90` does,
// widens the elements to f32 and normalises them, and writes f32 or f16 values into the
// batch tensor of the array's name.
//
// One dispatch per batch (`gpu::jobs`): each workgroup finds its job in `jobs` by its number,
// and its invocations loop over the job's values (f16: words) with the stride of the job's
// workgroups. A job reads its array from one of three source bindings (`job.source`: the
// caller's uploaded bytes and decoded arrays, each from a word boundary); elements of 1 or 2
// bytes are packed little-endian in words. Every conversion is integer steps, and the
// normalisation is one f32 subtraction then one multiplication with tiny values flushed
// (`loader::TensorNorm`), so no fused multiply-add, division or subnormal handling can make
// the GPU differ from the CPU.
//
// `dst` is atomic so that f16 values of two jobs may share a word: a job stores the words it
// fills and ORs its half into a word it shares (the output buffer is new, so zeroed).

// `TensorWindowJob` is generated from src/gpu/abi.rs (gpu::shaders); TENSOR_WG and the
// ELEMENT_* codes come from the generated prelude.

@group(0) @binding(0) var<storage, read> jobs: array<TensorWindowJob>;
@group(0) @binding(1) var<storage, read> src0: array<u32>;
@group(0) @binding(2) var<storage, read> src1: array<u32>;
@group(0) @binding(3) var<storage, read> src2: array<u32>;
@group(0) @binding(4) var<storage, read_write> dst: array<atomic<u32>>;

// The job of this workgroup, read from `jobs` on entry.
var<private> job: TensorWindowJob;

// Word i of the job's array in its source binding.
fn src_word(i: u32) -> u32 {
    let w = job.src_offset + i;
    if (job.source == 0u) {
        return src0[w];
    }
    if (job.source == 1u) {
        return src1[w];
    }
    return src2[w];
}

// f32 bits of the unsigned integer a, rounded to nearest, ties to even.
fn u32_to_f32_bits(a: u32) -> u32 {
    if (a == 0u) {
        return 0u;
    }
    let msb = firstLeadingBit(a);
    if (msb <= 23u) {
        return ((msb + 127u) << 23u) | ((a << (23u - msb)) & 0x7fffffu);
    }
    // A carry out of the rounded significand bumps the exponent: still right.
    return ((msb + 127u) << 23u) + (round_shift(a, msb - 23u) - 0x800000u);
}

// f32 bits of the signed integer in bits, rounded to nearest, ties to even.
fn i32_to_f32_bits(bits: u32) -> u32 {
    if ((bits & 0x80000000u) == 0u) {
        return u32_to_f32_bits(bits);
    }
    return 0x80000000u | u32_to_f32_bits(0u - bits);
}

// f32 bits of IEEE binary16 bits h (exact; NaN payloads kept).
fn f16_to_f32_bits(h: u32) -> u32 {
    let sign = (h & 0x8000u) << 16u;
    let exp = (h >> 10u) & 0x1fu;
    let man = h & 0x3ffu;
    if (exp == 0u) {
        if (man == 0u) {
            return sign;
        }
        // Subnormal: man x 2^-24, a normal f32.
        let msb = firstLeadingBit(man);
        return sign | ((msb + 103u) << 23u) | ((man << (23u - msb)) & 0x7fffffu);
    }
    if (exp == 31u) {
        return sign | 0x7f800000u | (man << 13u);
    }
    return sign | ((exp + 112u) << 23u) | (man << 13u);
}

// f32 bits of element e of the job's array.
fn element_bits(e: u32) -> u32 {
    switch job.element {
        case ELEMENT_F32: {
            return src_word(e);
        }
        case ELEMENT_F16, ELEMENT_BF16, ELEMENT_U16, ELEMENT_I16: {
            let h = (src_word(e / 2u) >> (16u * (e % 2u))) & 0xffffu;
            if (job.element == ELEMENT_F16) {
                return f16_to_f32_bits(h);
            }
            if (job.element == ELEMENT_BF16) {
                return h << 16u;
            }
            if (job.element == ELEMENT_I16) {
                return i32_to_f32_bits(bitcast<u32>(bitcast<i32>(h << 16u) >> 16u));
            }
            return u32_to_f32_bits(h);
        }
        case ELEMENT_U8, ELEMENT_I8: {
            let b = (src_word(e / 4u) >> (8u * (e % 4u))) & 0xffu;
            if (job.element == ELEMENT_I8) {
                return i32_to_f32_bits(bitcast<u32>(bitcast<i32>(b << 24u) >> 24u));
            }
            return u32_to_f32_bits(b);
        }
        case ELEMENT_I32: {
            return i32_to_f32_bits(src_word(e));
        }
        default: {
            return u32_to_f32_bits(src_word(e));
        }
    }
}

// Bits b, or a zero of their sign where their magnitude is at most 2^-126.
fn flush(b: u32) -> u32 {
    if ((b & 0x7fffffffu) <= 0x00800000u) {
        return b & 0x80000000u;
    }
    return b;
}

// `TensorNorm::apply`: non-finite values pass; else flush(flush(flush(x) - mean) * scale).
fn normalised(b: u32) -> u32 {
    if ((b & 0x7f800000u) == 0x7f800000u) {
        return b;
    }
    let d = flush(bitcast<u32>(bitcast<f32>(flush(b)) - job.mean));
    return flush(bitcast<u32>(bitcast<f32>(d) * job.scale));
}

// f32 bits of output value k of the job: its leading index, then its window coordinate
// (quarter turns undone, then flips) into the array.
fn value_bits(k: u32) -> u32 {
    let plane_out = job.size1 * job.size2;
    let win = job.size0 * plane_out;
    let lead = k / win;
    let r = k % win;
    let o0 = r / plane_out;
    let o1 = (r % plane_out) / job.size2;
    let o2 = r % job.size2;
    let m = job.size2;
    var w1 = o1;
    var w2 = o2;
    if (job.rot90 == 1u) {
        w1 = o2;
        w2 = m - 1u - o1;
    } else if (job.rot90 == 2u) {
        w1 = m - 1u - o1;
        w2 = m - 1u - o2;
    } else if (job.rot90 == 3u) {
        w1 = m - 1u - o2;
        w2 = o1;
    }
    let c0 = select(o0, job.size0 - 1u - o0, (job.flips & 1u) != 0u);
    let c1 = select(w1, job.size1 - 1u - w1, (job.flips & 2u) != 0u);
    let c2 = select(w2, job.size2 - 1u - w2, (job.flips & 4u) != 0u);
    let plane = job.extent0 * job.extent1 * job.extent2;
    let at = lead * plane + ((job.origin0 + c0) * job.extent1 + job.origin1 + c1) * job.extent2
        + job.origin2 + c2;
    let b = element_bits(at);
    if (job.normalise == 1u) {
        return normalised(b);
    }
    return b;
}

@compute @workgroup_size(TENSOR_WG)
fn tensor_window(@builtin(workgroup_id) wid: vec3<u32>,
                 @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let first = job_invocation(wid, nwg, lid, TENSOR_WG);
    if (first == NO_JOB) {
        return;
    }
    let stride = job.wg_count * TENSOR_WG;
    if (job.half == 0u) {
        for (var k = first; k < job.count; k += stride) {
            atomicStore(&dst[job.dst_offset + k], value_bits(k));
        }
        return;
    }
    // f16: word t of the job holds its values 2t - p and 2t - p + 1 (p: the parity of its
    // first value); a value outside the job belongs to the neighbouring job.
    let p = job.dst_offset % 2u;
    let words = (p + job.count + 1u) / 2u;
    for (var t = first; t < words; t += stride) {
        let w = job.dst_offset / 2u + t;
        if (t == 0u && p == 1u) {
            atomicOr(&dst[w], f16_bits(value_bits(0u)) << 16u);
        } else if (2u * t - p + 1u >= job.count) {
            atomicOr(&dst[w], f16_bits(value_bits(2u * t - p)));
        } else {
            let lo = f16_bits(value_bits(2u * t - p));
            let hi = f16_bits(value_bits(2u * t - p + 1u));
            atomicStore(&dst[w], lo | (hi << 16u));
        }
    }
}
