//! CPU twin of `shaders/tensor_window.wgsl`: entry point `tensor_window`, one job after
//! another, each job's values (f16: words) in order, with the shader's integer conversions
//! and its normalisation. Held to `loader::TensorAugment::apply` bit for bit by
//! `loader::tensor_gpu`'s tests; the GPU tests hold the shader to both.

use crate::gpu::abi::{element, TensorWindowJob};

/// Twin of `round_shift`: `value >> shift` (1..=31), rounded to nearest, ties to even.
fn round_shift(value: u32, shift: u32) -> u32 {
    let r = value >> shift;
    let rem = value & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    r + (rem > half || (rem == half && r & 1 == 1)) as u32
}

/// Twin of `u32_to_f32_bits`.
fn u32_to_f32_bits(a: u32) -> u32 {
    if a == 0 {
        return 0;
    }
    let msb = 31 - a.leading_zeros();
    if msb <= 23 {
        return ((msb + 127) << 23) | ((a << (23 - msb)) & 0x7f_ffff);
    }
    ((msb + 127) << 23) + (round_shift(a, msb - 23) - 0x80_0000)
}

/// Twin of `i32_to_f32_bits`.
fn i32_to_f32_bits(bits: u32) -> u32 {
    if bits & 0x8000_0000 == 0 {
        return u32_to_f32_bits(bits);
    }
    0x8000_0000 | u32_to_f32_bits(0u32.wrapping_sub(bits))
}

/// Twin of `f16_to_f32_bits`.
fn f16_to_f32_bits(h: u32) -> u32 {
    let sign = (h & 0x8000) << 16;
    let exp = (h >> 10) & 0x1f;
    let man = h & 0x3ff;
    if exp == 0 {
        if man == 0 {
            return sign;
        }
        let msb = 31 - man.leading_zeros();
        return sign | ((msb + 103) << 23) | ((man << (23 - msb)) & 0x7f_ffff);
    }
    if exp == 31 {
        return sign | 0x7f80_0000 | (man << 13);
    }
    sign | ((exp + 112) << 23) | (man << 13)
}

/// Twin of `element_bits`: f32 bits of element `e` of the job's array in `src`.
fn element_bits(job: &TensorWindowJob, src: &[u32], e: u32) -> u32 {
    let word = |i: u32| src[(job.src_offset + i) as usize];
    match job.element {
        element::F32 => word(e),
        element::F16 | element::BF16 | element::U16 | element::I16 => {
            let h = (word(e / 2) >> (16 * (e % 2))) & 0xffff;
            match job.element {
                element::F16 => f16_to_f32_bits(h),
                element::BF16 => h << 16,
                element::I16 => i32_to_f32_bits((((h << 16) as i32) >> 16) as u32),
                _ => u32_to_f32_bits(h),
            }
        }
        element::U8 | element::I8 => {
            let b = (word(e / 4) >> (8 * (e % 4))) & 0xff;
            if job.element == element::I8 {
                i32_to_f32_bits((((b << 24) as i32) >> 24) as u32)
            } else {
                u32_to_f32_bits(b)
            }
        }
        element::I32 => i32_to_f32_bits(word(e)),
        _ => u32_to_f32_bits(word(e)),
    }
}

/// Twin of `flush`.
fn flush(b: u32) -> u32 {
    if b & 0x7fff_ffff <= 0x0080_0000 {
        b & 0x8000_0000
    } else {
        b
    }
}

/// Twin of `normalised`.
fn normalised(job: &TensorWindowJob, b: u32) -> u32 {
    if b & 0x7f80_0000 == 0x7f80_0000 {
        return b;
    }
    let d = flush((f32::from_bits(flush(b)) - job.mean).to_bits());
    flush((f32::from_bits(d) * job.scale).to_bits())
}

/// Twin of `value_bits`: f32 bits of output value `k` of the job.
fn value_bits(job: &TensorWindowJob, src: &[u32], k: u32) -> u32 {
    let plane_out = job.size1 * job.size2;
    let win = job.size0 * plane_out;
    let lead = k / win;
    let r = k % win;
    let (o0, o1, o2) = (r / plane_out, (r % plane_out) / job.size2, r % job.size2);
    let m = job.size2;
    let (w1, w2) = match job.rot90 {
        1 => (o2, m - 1 - o1),
        2 => (m - 1 - o1, m - 1 - o2),
        3 => (m - 1 - o2, o1),
        _ => (o1, o2),
    };
    let pick = |w: u32, size: u32, bit: u32| {
        if job.flips & bit != 0 {
            size - 1 - w
        } else {
            w
        }
    };
    let (c0, c1, c2) = (
        pick(o0, job.size0, 1),
        pick(w1, job.size1, 2),
        pick(w2, job.size2, 4),
    );
    let plane = job.extent0 * job.extent1 * job.extent2;
    let at = lead * plane
        + ((job.origin0 + c0) * job.extent1 + job.origin1 + c1) * job.extent2
        + job.origin2
        + c2;
    let b = element_bits(job, src, at);
    if job.normalise == 1 {
        normalised(job, b)
    } else {
        b
    }
}

/// Twin of `f16_bits`: IEEE binary16 bits of f32 bits `b`, rounded to nearest, ties to
/// even.
fn f16_bits(b: u32) -> u32 {
    let sign = (b >> 16) & 0x8000;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 255 {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 31 {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        return sign | round_shift(man | 0x80_0000, (14 - e) as u32);
    }
    sign | round_shift(((e as u32) << 23) | man, 13)
}

/// Twin of the entry point `tensor_window` over one dispatch: every job of `jobs` reads its
/// array from `src[job.source]` and writes its values into `dst` (zeroed where f16 jobs
/// share words). Arguments in binding order.
pub(crate) fn tensor_window(jobs: &[TensorWindowJob], src: [&[u32]; 3], dst: &mut [u32]) {
    for job in jobs {
        let s = src[job.source as usize];
        if job.half == 0 {
            for k in 0..job.count {
                dst[(job.dst_offset + k) as usize] = value_bits(job, s, k);
            }
            continue;
        }
        let p = job.dst_offset % 2;
        let words = (p + job.count).div_ceil(2);
        for t in 0..words {
            let w = (job.dst_offset / 2 + t) as usize;
            if t == 0 && p == 1 {
                dst[w] |= f16_bits(value_bits(job, s, 0)) << 16;
            } else if 2 * t - p + 1 >= job.count {
                dst[w] |= f16_bits(value_bits(job, s, 2 * t - p));
            } else {
                let lo = f16_bits(value_bits(job, s, 2 * t - p));
                let hi = f16_bits(value_bits(job, s, 2 * t - p + 1));
                dst[w] = lo | (hi << 16);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The integer conversions equal Rust's (round to nearest, ties to even; f16 exact).
    #[test]
    fn conversions_match_rust() {
        let mut x = 0x9E37_79B9u32;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            assert_eq!(u32_to_f32_bits(x), (x as f32).to_bits(), "{x}");
            assert_eq!(i32_to_f32_bits(x), (x as i32 as f32).to_bits(), "{x}");
        }
        for h in 0..=u16::MAX {
            let want = crate::tensor::f16_to_f32(h).to_bits();
            assert_eq!(f16_to_f32_bits(h as u32), want, "{h:#06x}");
        }
        for a in [
            1u32 << 24 | 1,
            (1 << 24) + 3,
            u32::MAX,
            0x8000_0000,
            0xFFFF_FF80,
        ] {
            assert_eq!(u32_to_f32_bits(a), (a as f32).to_bits(), "{a}");
        }
        // f16 rounding: ties to even, overflow to infinity, NaN stays NaN, tiny to zero.
        let h = |x: f32| f16_bits(x.to_bits());
        assert_eq!(h(1.0 + 1.0 / 2048.0), 0x3c00);
        assert_eq!(h(1.0 + 3.0 / 2048.0), 0x3c02);
        assert_eq!(h(65520.0), 0x7c00);
        assert_eq!(h(f32::NAN) & 0x7e00, 0x7e00);
        assert_eq!(h(-1e-9), 0x8000);
    }
}
