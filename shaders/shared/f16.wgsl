// Rounding shared by the kernels that write float16 (`augment.wgsl`, `tensor_window.wgsl`):
// integer steps only, so no float16 capability is needed.

// x >> shift (1..=31), rounded to nearest, ties to even.
fn round_shift(value: u32, shift: u32) -> u32 {
    let r = value >> shift;
    let rem = value & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    return r + select(0u, 1u, rem > half || (rem == half && (r & 1u) == 1u));
}

// IEEE binary16 bits of f32 bits b, rounded to nearest, ties to even (`f32_to_f16_bits` on
// the CPU, the same integer steps).
fn f16_bits(b: u32) -> u32 {
    let sign = (b >> 16u) & 0x8000u;
    let exp = i32((b >> 23u) & 0xffu);
    let man = b & 0x7fffffu;
    if (exp == 255) {
        return sign | 0x7c00u | select(0u, 0x200u, man != 0u);
    }
    let e = exp - 127 + 15;
    if (e >= 31) {
        return sign | 0x7c00u;
    }
    if (e <= 0) {
        if (e < -10) {
            return sign;
        }
        return sign | round_shift(man | 0x800000u, u32(14 - e));
    }
    return sign | round_shift((u32(e) << 23u) | man, 13u);
}
