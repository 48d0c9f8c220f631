//! Any bytes as a block-coded stream (`field::blocks`): the parser and the decoder return
//! values or an error, never panic or over-allocate; a stream that decodes parses, to as
//! many values as its head says (one that parses may still fail in its blocks). Any bytes as values too (the first 8 bytes a bound, the
//! first byte a stride where it divides the count): the encoder's stream parses, decodes
//! within its stored bound with every sign kept, and NaN and infinities come back bit for
//! bit.
#![no_main]
use libfuzzer_sys::fuzz_target;

use l3::field::blocks::{decode_blocks, encode_blocks, parse_blocks};

fuzz_target!(|input: &[u8]| {
    // (A stream may parse and still fail to decode: the blocks are checked as they decode.)
    let parsed = parse_blocks(input, 1 << 22);
    if let Ok(values) = decode_blocks(input, 1 << 22) {
        assert_eq!(values.len(), parsed.expect("decoded").values as usize);
    }
    if input.len() < 8 {
        return;
    }
    let bound = f64::from_le_bytes(input[..8].try_into().unwrap()).abs();
    let values: Vec<f32> = input[8..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let s = input[0] as usize;
    let stride = if s >= 2 && s <= values.len() && values.len() % s == 0 { s } else { s % 2 };
    let Ok(data) = encode_blocks(&values, bound, stride) else {
        assert!(bound.is_nan());
        return;
    };
    let header = parse_blocks(&data, u64::MAX).expect("the encoder's stream parses");
    let e = header.bound as f64;
    assert!(e <= bound);
    let decoded = decode_blocks(&data, u64::MAX).expect("and decodes");
    for (x, y) in values.iter().zip(&decoded) {
        if !x.is_finite() {
            assert_eq!(x.to_bits(), y.to_bits());
        } else {
            assert!(y.is_finite(), "{x} -> {y}");
            let close = (*x as f64 - *y as f64).abs() <= e;
            assert!(close || x.to_bits() == y.to_bits(), "{x} -> {y} (bound {e})");
            assert_eq!(*x > 0.0, *y > 0.0);
            assert_eq!(*x < 0.0, *y < 0.0);
        }
    }
});
